import CSignalShim

/// The sections of one report file, decoded: strict about the header, lenient after it
/// (counts clamped to what is present, unknown sections skipped, larger entries read by their
/// known prefix).
package struct ReportFile {
    /// Largest file the writer can produce, with room to spare.
    package static let maximumSize = 16 << 20

    package var kind: UInt32
    package var flags: UInt32
    package var committed: Bool
    package var liveValue: UInt64?
    package var liveUpdatedNs: UInt64
    package var liveFlags: UInt32
    package var context: aft_context?
    /// The machine (crash files that have it).
    package var system: aft_system_info?
    package var crash: aft_crash_info?
    package var hang: aft_hang_info?
    /// The watched target a hang is of (files without it: the main thread).
    package var hangTarget: aft_hang_target?
    package var frames: [UInt64] = []
    package var framesTruncated = false
    package var images: [aft_image] = []
    package var imagesTruncated = false
    package var threadsInfo: aft_threads_info?
    package var threadRecords: [aft_thread] = []
    package var threadFrames: [UInt64] = []
    /// Stack memory sections: the thread, the first byte's address, the bytes.
    package var stacks: [(threadID: UInt64, start: UInt64, bytes: [UInt8])] = []
    /// The Swift async callers of the recorded threads, by thread id.
    package var swiftAsync: [UInt64: SwiftAsyncChain] = [:]

    /// Decodes a file's bytes. A file that was never committed is decoded only when
    /// salvage is true (a leftover .tmp), and then only as far as it is whole.
    package static func decode(_ bytes: [UInt8], salvage: Bool = false) throws(ReportFileError) -> ReportFile {
        let h = try FileHeader.validate(bytes, kinds: FileHeader.Kinds.crash.union(.hang), maximumSize: maximumSize)
        let committed = h.commit == AFT_COMMIT_MARKER
        let bodyStart = Int(h.header_size)
        if committed {
            try FileHeader.verifyBody(bytes, header: h, start: bodyStart, length: bytes.count - bodyStart)
        } else if !salvage {
            throw .notCommitted
        }
        let bodyEnd = bytes.count

        var file = ReportFile(
            kind: h.kind, flags: h.flags, committed: committed,
            liveValue: nil, liveUpdatedNs: 0, liveFlags: 0)
        if h.live_check != 0, h.live_check == aft_live_check(h.live_value, h.live_updated_ns) {
            file.liveValue = h.live_value
            file.liveUpdatedNs = h.live_updated_ns
            file.liveFlags = h.live_flags
        }
        file.readSections(bytes, from: bodyStart, to: bodyEnd)
        guard file.context != nil else {
            if !committed { throw .notCommitted }
            throw .missingSection("context")
        }
        return file
    }

    private mutating func readSections(_ bytes: [UInt8], from start: Int, to end: Int) {
        let sectionHeaderSize = MemoryLayout<aft_section_header>.size
        var offset = start
        // An IMAGE_LIST whose IMAGE_PATHS has not come right after it: paths missing.
        var listWithoutPaths = false
        defer { if listWithoutPaths { imagesTruncated = true } }
        bytes.withUnsafeBytes { raw in
            while offset + sectionHeaderSize <= end {
                let s = raw.loadUnaligned(fromByteOffset: offset, as: aft_section_header.self)
                offset += sectionHeaderSize
                let pathsDue = listWithoutPaths
                if pathsDue, s.type != UInt32(AFT_SECTION_IMAGE_PATHS) {
                    imagesTruncated = true
                    listWithoutPaths = false
                }
                let entrySize = Int(s.entry_size)
                guard entrySize > 0, entrySize <= ReportFile.maximumSize else { return }
                let available = (end - offset) / entrySize
                let count = min(Int(s.count), available)
                let truncated = s.flags & UInt32(AFT_SECTION_TRUNCATED) != 0 || count < Int(s.count)
                func entries<T>(_ type: T.Type, capacity: UInt32) -> [T] {
                    guard entrySize >= MemoryLayout<T>.size else { return [] }
                    return (0..<min(count, Int(capacity))).map {
                        raw.loadUnaligned(fromByteOffset: offset + $0 * entrySize, as: T.self)
                    }
                }
                switch s.type {
                case UInt32(AFT_SECTION_CONTEXT): context = entries(aft_context.self, capacity: 1).first
                case UInt32(AFT_SECTION_SYSTEM): system = entries(aft_system_info.self, capacity: 1).first
                case UInt32(AFT_SECTION_CRASH): crash = entries(aft_crash_info.self, capacity: 1).first
                case UInt32(AFT_SECTION_HANG): hang = entries(aft_hang_info.self, capacity: 1).first
                case UInt32(AFT_SECTION_HANG_TARGET): hangTarget = entries(aft_hang_target.self, capacity: 1).first
                case UInt32(AFT_SECTION_FRAMES):
                    frames = entries(UInt64.self, capacity: AFT_MAX_FRAMES)
                    framesTruncated = truncated || Int(s.count) > Int(AFT_MAX_FRAMES)
                case UInt32(AFT_SECTION_IMAGES):
                    images = entries(aft_image.self, capacity: AFT_MAX_IMAGES)
                    imagesTruncated = truncated || Int(s.count) > Int(AFT_MAX_IMAGES)
                case UInt32(AFT_SECTION_IMAGE_LIST):
                    guard entrySize >= Int(AFT_IMAGE_ENTRY_SIZE) else { break }
                    images = (0..<min(count, Int(AFT_MAX_IMAGES))).map {
                        ReportFile.listedImage(raw, at: offset + $0 * entrySize)
                    }
                    imagesTruncated = truncated || Int(s.count) > Int(AFT_MAX_IMAGES)
                    listWithoutPaths = true
                case UInt32(AFT_SECTION_IMAGE_PATHS):
                    // Only the paths of the list right before it: never an IMAGES section's.
                    guard pathsDue else { break }
                    listWithoutPaths = false
                    if entrySize != 1 || !ReportFile.givePaths(&images, from: raw, at: offset, count: count) {
                        images = []
                        imagesTruncated = true
                    }
                case UInt32(AFT_SECTION_THREADS_INFO):
                    threadsInfo = entries(aft_threads_info.self, capacity: 1).first
                case UInt32(AFT_SECTION_THREADS):
                    threadRecords = entries(aft_thread.self, capacity: AFT_MAX_THREADS)
                case UInt32(AFT_SECTION_THREAD_FRAMES):
                    threadFrames = entries(
                        UInt64.self, capacity: AFT_MAX_THREADS * AFT_THREAD_MAX_FRAMES + AFT_MAX_FRAMES)
                case UInt32(AFT_SECTION_STACK_MEMORY):
                    let headerSize = MemoryLayout<aft_memory_header>.size
                    if entrySize == 1, count >= headerSize {
                        let m = raw.loadUnaligned(fromByteOffset: offset, as: aft_memory_header.self)
                        let size = min(Int(clamping: m.size), count - headerSize)
                        let body = offset + headerSize
                        stacks.append((m.thread_id, m.start, Array(raw[body..<(body + size)])))
                    }
                case UInt32(AFT_SECTION_SWIFT_ASYNC):
                    swiftAsync = SwiftAsyncChain.chains(
                        from: entries(aft_swift_async_link.self, capacity: AFT_MAX_THREADS * AFT_SWIFT_ASYNC_MAX_LINKS))
                default: break  // a section from a newer writer: skipped by its size
                }
                let declared = Int(s.count).multipliedReportingOverflow(by: entrySize)
                guard !declared.overflow, offset + declared.partialValue <= end else { return }
                offset += declared.partialValue
            }
        }
    }

    /// An IMAGE_LIST entry: its image up to the path, which IMAGE_PATHS gives.
    private static func listedImage(_ raw: UnsafeRawBufferPointer, at offset: Int) -> aft_image {
        var image = aft_image()
        withUnsafeMutableBytes(of: &image) {
            $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: raw[offset..<(offset + Int(AFT_IMAGE_ENTRY_SIZE))]))
        }
        return image
    }

    /// The listed images' paths from an IMAGE_PATHS section of count bytes at offset, path_size
    /// bytes each in list order; false when a size is past the section or the path capacity.
    private static func givePaths(
        _ images: inout [aft_image], from raw: UnsafeRawBufferPointer, at offset: Int, count: Int
    ) -> Bool {
        var at = offset
        for i in images.indices {
            let size = Int(images[i].path_size)
            guard size < Int(AFT_PATH_CAPACITY), at + size <= offset + count else { return false }
            withUnsafeMutableBytes(of: &images[i].path) { path in
                path.copyMemory(from: UnsafeRawBufferPointer(rebasing: raw[at..<(at + size)]))
                path[size] = 0
            }
            at += size
        }
        return true
    }

    /// This file as a crash report, or the reason it is not one.
    package func crashReport() throws(ReportFileError) -> CrashReport {
        guard kind == AFT_KIND_CRASH else { throw .unexpectedKind(kind) }
        guard let context, let crash else { throw .missingSection("crash") }
        var report = CrashReport(
            context: ReportContext(context), info: crash, frames: frames,
            framesTruncated: framesTruncated, images: images.map(LoadedImage.init),
            imagesTruncated: imagesTruncated, isPartial: !committed)
        report.handlerFaulted = flags & UInt32(AFT_FLAG_NESTED_FAULT) != 0
        report.machine = system.map(MachineInfo.init)
        report.threadCapture = threadsInfo.map(ThreadCapture.init)
        report.threads = crashThreads()
        report.asyncChain = swiftAsync[crash.thread_id]
        report.unwindDeferredFrames()
        report.reunwindThreadsKnownBySPAndPC()
        return report
    }
}

extension ReportFile {
    /// The thread records with their frames (sliced from THREAD_FRAMES in record order) and
    /// stack memory (matched by thread id). A record whose frames run past the section keeps
    /// what is there.
    package func crashThreads() -> [CrashThread] {
        var next = 0
        var stackByThread: [UInt64: (start: UInt64, bytes: [UInt8])] = [:]
        for s in stacks where stackByThread[s.threadID] == nil { stackByThread[s.threadID] = (s.start, s.bytes) }
        return threadRecords.map { r in
            let n = min(Int(r.frame_count), Int(AFT_MAX_FRAMES))
            let end = min(next + n, threadFrames.count)
            let frames = next < end ? Array(threadFrames[next..<end]) : []
            next = min(next + n, threadFrames.count)
            let memory = stackByThread[r.thread_id]
            var thread = CrashThread(
                record: r, frames: frames, stackStart: memory?.start ?? 0, stack: memory?.bytes ?? [])
            thread.asyncChain = swiftAsync[r.thread_id]
            return thread
        }
    }

    /// CRC-32 (IEEE 802.3) as the report files use it.
    package static func crc32(_ raw: UnsafeRawBufferPointer) -> UInt32 {
        guard let base = raw.baseAddress else { return 0 }
        return aft_crc32(0, base, raw.count)
    }
}
