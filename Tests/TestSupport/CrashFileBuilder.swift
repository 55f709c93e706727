import AftermathNextLaunch
import CSignalShim

/// Crash files of format version 2, encoded as the crash handler lays them out (header, then
/// sections), for tests that need a pending crash with every thread's records.
package enum CrashFileBuilder {
    /// One thread's stack memory (a STACK_MEMORY section).
    package struct Stack {
        package var threadID: UInt64
        package var start: UInt64
        package var bytes: [UInt8]

        package init(threadID: UInt64, start: UInt64, bytes: [UInt8]) {
            self.threadID = threadID
            self.start = start
            self.bytes = bytes
        }
    }

    /// A committed crash file. threadFrames: each record's frame_count frames, in record order;
    /// system: a SYSTEM section after the context.
    package static func crashFile(
        context: aft_context, crash: aft_crash_info, frames: [UInt64], images: [aft_image],
        threadsInfo: aft_threads_info? = nil, threads: [aft_thread], threadFrames: [UInt64], stacks: [Stack],
        system: aft_system_info? = nil
    ) -> [UInt8] {
        var body: [UInt8] = []
        func section<T>(_ type: UInt32, _ entries: [T]) {
            var h = aft_section_header()
            h.type = type
            h.entry_size = UInt32(MemoryLayout<T>.size)
            h.count = UInt32(entries.count)
            withUnsafeBytes(of: h) { body.append(contentsOf: $0) }
            for var e in entries { withUnsafeBytes(of: &e) { body.append(contentsOf: $0) } }
        }
        section(UInt32(AFT_SECTION_CONTEXT), [context])
        if let system { section(UInt32(AFT_SECTION_SYSTEM), [system]) }
        section(UInt32(AFT_SECTION_CRASH), [crash])
        section(UInt32(AFT_SECTION_FRAMES), frames)
        section(UInt32(AFT_SECTION_IMAGES), images)
        if let threadsInfo { section(UInt32(AFT_SECTION_THREADS_INFO), [threadsInfo]) }
        section(UInt32(AFT_SECTION_THREADS), threads)
        section(UInt32(AFT_SECTION_THREAD_FRAMES), threadFrames)
        for s in stacks {
            var m = aft_memory_header()
            m.thread_id = s.threadID
            m.start = s.start
            m.size = UInt64(s.bytes.count)
            var h = aft_section_header()
            h.type = UInt32(AFT_SECTION_STACK_MEMORY)
            h.entry_size = 1
            h.count = UInt32(MemoryLayout<aft_memory_header>.size + s.bytes.count)
            withUnsafeBytes(of: h) { body.append(contentsOf: $0) }
            withUnsafeBytes(of: m) { body.append(contentsOf: $0) }
            body.append(contentsOf: s.bytes)
        }
        var header = aft_file_header()
        header.magic = AFT_MAGIC
        header.version = UInt16(AFT_FORMAT_VERSION)
        header.header_size = UInt16(MemoryLayout<aft_file_header>.size)
        header.kind = UInt32(AFT_KIND_CRASH)
        header.body_size = UInt64(body.count)
        header.body_crc = body.withUnsafeBytes { ReportFile.crc32($0) }
        header.commit = AFT_COMMIT_MARKER
        return withUnsafeBytes(of: header) { Array($0) } + body
    }

    /// A version-1 crash file with thread records added: its context, crash, frames and images
    /// kept.
    package static func adding(
        threads: [aft_thread], threadFrames: [UInt64], stacks: [Stack], to v1: [UInt8]
    ) throws -> [UInt8] {
        let file = try ReportFile.decode(v1)
        guard let context = file.context, let crash = file.crash else { throw ReportFileError.missingSection("crash") }
        return crashFile(
            context: context, crash: crash, frames: file.frames, images: file.images, threads: threads,
            threadFrames: threadFrames, stacks: stacks)
    }

    /// A thread record.
    package static func thread(
        id: UInt64, name: String, flags: UInt32 = 0, source: UInt32, why: UInt32 = 0, state: Character = "S",
        pc: UInt64 = 0, sp: UInt64 = 0, registers: [UInt64] = [], frames: Int = 0
    ) -> aft_thread {
        var t = aft_thread()
        t.thread_id = id
        CString.write(name, into: &t.name)
        t.flags = flags
        t.context_source = source
        t.why = why
        t.state = CChar(bitPattern: state.asciiValue ?? UInt8(ascii: "?"))
        t.pc = pc
        t.sp = sp
        t.register_count = UInt32(min(registers.count, Int(AFT_MAX_REGISTERS)))
        withUnsafeMutableBytes(of: &t.registers) { raw in
            for (i, r) in registers.prefix(Int(AFT_MAX_REGISTERS)).enumerated() {
                raw.storeBytes(of: r.littleEndian, toByteOffset: 8 * i, as: UInt64.self)
            }
        }
        t.syscall_number = -2
        t.frame_count = UInt32(frames)
        return t
    }
}
