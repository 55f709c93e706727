import CSignalShim
import Foundation

/// A hang as the watchdog recorded it: the blocked thread's stack and what the kernel said
/// about it, its start, and its duration so far.
package struct HangReport: Sendable, Hashable {
    /// The run that hung: its session, release and OS; `reportID` is the hang's own id.
    package var context: ReportContext
    /// When the watched thread stopped answering, nanoseconds since the Unix epoch.
    package var timeUnixNano: UInt64
    /// The duration in milliseconds: final when ``isFinished``, otherwise the last update.
    package var durationMilliseconds: UInt64
    /// The watched thread ran again and the duration is final.
    package var isFinished: Bool
    /// The threshold in force, in milliseconds.
    package var thresholdMilliseconds: UInt64
    /// Kernel thread id of the blocked thread.
    package var threadID: UInt64
    /// Its name (from /proc, at most 15 bytes).
    package var threadName: String
    /// The state letter /proc gave when the hang was detected: R, S, D, ...
    package var threadState: Character
    /// The system call the thread was blocked in, when it was in one.
    package var syscallNumber: Int64?
    /// The kernel's wait channel (a kernel function name), when the kernel shows it.
    package var waitChannel: String
    /// How the stack was taken: `"signal"` (a handler on the thread unwound it) or `"proc"`
    /// (the thread could not take a signal: pc from /proc, then return addresses found on its
    /// stack, which may include stale ones).
    package var captureMethod: HangCaptureMethod
    /// How long the thread was stopped for the capture, in nanoseconds (signal captures).
    package var capturePauseNanoseconds: UInt64
    /// The blocked thread's stack, innermost first.
    package var frames: [UInt64]
    /// More frames existed than the file holds.
    package var framesTruncated: Bool
    /// The images loaded when the hang was captured.
    package var images: [LoadedImage]
    /// session.previous_id: the session before the hang's, when the app started a new one.
    package var previousSessionID: UUID?
    /// The other threads at the capture (format version 2, with hangOtherThreads); the watched
    /// thread is not among them: its stack is ``frames``.
    package var threads: [CrashThread] = []
    /// The blocked thread's Swift async callers, when it ran in a task.
    package var asyncChain: SwiftAsyncChain?
    /// What was watched: the main thread, an event loop, a thread, a unit of work or the Swift
    /// concurrency pool.
    package var kind: HangKind = .main
    /// The name the target was watched under ("main" for the main thread).
    package var targetName = "main"
    /// Hangs of this target left unrecorded by the rate limit since its previous record.
    package var suppressed: UInt32 = 0
    /// The pool's figures (kind `concurrency_pool`).
    package var pool: PoolState?

    /// What the Swift concurrency pool's workers were doing when its probe could not start.
    package struct PoolState: Sendable, Hashable {
        /// The queue's width: the configured CPUs.
        package var width: UInt32
        /// Threads inside a Swift job.
        package var jobs: UInt32
        /// Of those, asleep (a lock, a semaphore, I/O): the pool is blocked.
        package var blocked: UInt32
        /// Of those, running.
        package var busy: UInt32
        /// `blocked` when any worker inside a job sleeps, `saturated` when they all run.
        package var state: String { blocked > 0 ? "blocked" : busy > 0 ? "saturated" : "unknown" }
    }

    /// The state letter in words, as records carry it (`apsio.hang.thread_state`).
    package var threadStateName: String {
        switch threadState {
        case "R": return "running"
        case "S": return "sleeping"
        case "D": return "disk_sleep"
        case "T": return "stopped"
        case "t": return "tracing_stop"
        case "Z": return "zombie"
        case "X": return "dead"
        case "I": return "idle"
        case "P": return "parked"
        case "W": return "waking"
        default: return "unknown"
        }
    }
}

extension HangReport {
    /// The hang in a decoded file, or why it is not one. An unfinished hang without a valid
    /// live block (killed before the first update) has duration 0.
    package init(file: ReportFile) throws(ReportFileError) {
        guard file.kind == AFT_KIND_HANG else { throw .unexpectedKind(file.kind) }
        guard let c = file.context, var h = file.hang else { throw .missingSection("hang") }
        context = ReportContext(c)
        timeUnixNano = h.begin_realtime_ns
        durationMilliseconds = file.liveValue ?? 0
        isFinished = file.liveValue != nil && file.liveFlags & UInt32(AFT_FLAG_HANG_FINISHED) != 0
        thresholdMilliseconds = h.threshold_ms
        threadID = h.thread_id
        threadName = CString.read(&h.thread_name)
        let state = UInt8(bitPattern: h.thread_state)
        threadState =
            (state >= 0x41 && state <= 0x5A) || (state >= 0x61 && state <= 0x7A)
            ? Character(Unicode.Scalar(state)) : "?"
        syscallNumber = h.syscall_number == UInt64.max ? nil : Int64(truncatingIfNeeded: h.syscall_number)
        waitChannel = CString.read(&h.wait_channel)
        captureMethod = HangCaptureMethod(code: h.capture_method)
        capturePauseNanoseconds = h.capture_pause_ns
        frames = file.frames
        framesTruncated = file.framesTruncated
        images = file.images.map(LoadedImage.init)
        let previous = UUID(bytes: &h.previous_session_id)
        previousSessionID = previous.bytes.allSatisfy { $0 == 0 } ? nil : previous
        threads = file.crashThreads()
        asyncChain = file.swiftAsync[h.thread_id]
        if var target = file.hangTarget {
            kind = HangKind(code: target.kind)
            targetName = CString.read(&target.name)
            suppressed = target.suppressed
            if kind == .concurrencyPool {
                pool = PoolState(
                    width: target.pool_width, jobs: target.pool_jobs, blocked: target.pool_blocked,
                    busy: target.pool_busy)
            }
        }
    }
}

extension HangReport {
    /// What a hang file's target was, in words, when not the main thread: "event loop loop-0,
    /// thread NIO-ELT-0-#0"; nil for the main thread and files without a target.
    package static func targetDescription(_ file: ReportFile) -> String? {
        guard var target = file.hangTarget, target.kind != UInt32(AFT_HANG_KIND_MAIN) else { return nil }
        let kind = HangKind(code: target.kind)
        let words = kind == .eventLoop ? "event loop" : kind == .concurrencyPool ? "concurrency pool" : kind.rawValue
        var text = "\(words) \(CString.read(&target.name))"
        if var h = file.hang, kind != .concurrencyPool {
            let name = CString.read(&h.thread_name)
            if !name.isEmpty { text += ", thread \(name)" }
        }
        return text
    }
}

/// What a hang's watched target was (`apsio.hang.kind`).
package enum HangKind: String, Sendable, Hashable {
    case main
    case eventLoop = "event_loop"
    case thread
    case work
    case concurrencyPool = "concurrency_pool"
    case unknown

    init(code: UInt32) {
        switch code {
        case UInt32(AFT_HANG_KIND_MAIN): self = .main
        case UInt32(AFT_HANG_KIND_EVENT_LOOP): self = .eventLoop
        case UInt32(AFT_HANG_KIND_THREAD): self = .thread
        case UInt32(AFT_HANG_KIND_WORK): self = .work
        case UInt32(AFT_HANG_KIND_CONCURRENCY_POOL): self = .concurrencyPool
        default: self = .unknown
        }
    }
}
