import Foundation

extension StackFormatter {
    /// apsio.threads holds at most this many bytes of JSON; threads past it are left out whole
    /// and counted in apsio.threads.omitted.
    package static let maxThreadsJSONBytes = 256 << 10
    /// Frames of one thread listed in apsio.threads at most (its innermost); past it the entry
    /// says `"frames_truncated": true`. exception.stacktrace keeps every frame of the crash.
    package static let maxThreadFrames = 256

    /// apsio.threads of a crash, and what went into it.
    package struct ThreadList: Sendable {
        /// The JSON array.
        package var json: String
        /// Threads listed.
        package var listed: Int
        /// Threads of the report left out by the size cap.
        package var omitted: Int
        /// Every frame the listed entries show, for apsio.crash.images.
        package var frames: [UInt64]
    }

    /// apsio.threads: a JSON array with one object per thread, the crashed thread first, then
    /// the others in the order the handler recorded them:
    /// `id` (kernel tid), `name`, `crashed`, `main` (tid == pid), `state` (the kernel's letter:
    /// R running, S sleeping, D uninterruptible, T stopped, t traced, "?" unknown), `context`
    /// (how its registers were taken: `signal` from its own signal frame, `crash` from its own
    /// crash, `syscall` only sp and pc from /proc, `none`), `why` when that is not a full
    /// context (`blocks_signal`, `stopped`, `uninterruptible`, `no_answer`, `signal_failed`,
    /// `no_signal`, `exiting`), `unwinder`, `stacktrace` (the format of exception.stacktrace),
    /// and when they apply: `syscall` and `syscall_name` (the system call it waits in, such as
    /// `futex` for a lock), `frames_truncated`, `also_crashed_signal` (it crashed too while the
    /// first crash was written), `aftermath` (one of Aftermath's own threads), `swift_job`
    /// (hangs: inside a Swift concurrency job, `swift_job_run` on its stack), `async_stacktrace`
    /// and `async_anchor` (its Swift async callers, as apsio.async_stacktrace).
    package static func threads(
        _ threads: [CrashThread], crashFrames: [UInt64], images: [LoadedImage], architecture: Architecture,
        maxBytes: Int = maxThreadsJSONBytes
    ) -> ThreadList {
        let ordered = threads.filter(\.crashed) + threads.filter { !$0.crashed }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        var body: [UInt8] = []
        var listed = 0
        var frames: [UInt64] = []
        for thread in ordered {
            let all = thread.crashed && thread.frames.isEmpty ? crashFrames : thread.frames
            let shown = Array(all.prefix(maxThreadFrames))
            let syscall = thread.syscallNumber.flatMap { $0 >= 0 ? $0 : nil }
            let entry = ThreadEntry(
                id: thread.id, name: thread.name, crashed: thread.crashed, main: thread.isMain, state: thread.state,
                context: thread.contextSource.rawValue, why: thread.missingContext?.rawValue,
                unwinder: thread.unwinder.rawValue,
                stacktrace: stacktrace(frames: shown, images: images),
                syscall: syscall,
                syscall_name: syscall.flatMap { HangRecordMapper.syscallName($0, architecture: architecture) },
                frames_truncated: thread.framesTruncated || all.count > shown.count ? true : nil,
                also_crashed_signal: thread.alsoCrashedSignal, aftermath: thread.isAftermath ? true : nil,
                swift_job: thread.isSwiftJob ? true : nil,
                async_stacktrace: thread.asyncChain.map { stacktrace(frames: $0.resumes, images: images) },
                async_anchor: thread.asyncChain?.anchor.rawValue)
            // Strings, numbers and booleans only: encoding cannot fail.
            guard let bytes = try? encoder.encode(entry) else { continue }
            // The first entry (the crashed thread, at most maxThreadFrames lines) always fits.
            if listed > 0, body.count + bytes.count + 3 > maxBytes { break }
            if listed > 0 { body.append(UInt8(ascii: ",")) }
            body += bytes
            listed += 1
            frames += shown + (thread.asyncChain?.resumes ?? [])
        }
        return ThreadList(
            json: "[" + String(decoding: body, as: UTF8.self) + "]", listed: listed,
            omitted: ordered.count - listed, frames: frames)
    }

    /// One entry of apsio.threads; nil fields are left out. Decoded again by tools that read
    /// records (the `aftermath` command).
    package struct ThreadEntry: Codable, Sendable {
        package var id: UInt64
        package var name: String
        package var crashed: Bool
        package var main: Bool
        package var state: String
        package var context: String
        package var why: String?
        package var unwinder: String
        package var stacktrace: String
        package var syscall: Int64?
        package var syscall_name: String?
        package var frames_truncated: Bool?
        package var also_crashed_signal: Int32?
        package var aftermath: Bool?
        package var swift_job: Bool?
        package var async_stacktrace: String?
        package var async_anchor: String?
    }
}
