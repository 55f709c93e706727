import CSignalShim

/// Unwinds a crashed thread at the next launch from its crash file alone: its registers at the
/// fault and its captured stack bytes, against the images' files on disk. An image is used
/// only when its file's build id is the one recorded at the crash (libunwind walks frame
/// pointers through the others).
package enum RemoteUnwinder {
    /// At most this many frames, as the handler's own unwinder.
    package static let capacity = Int(AFT_MAX_FRAMES)

    /// The frames of a thread (pc first, then return addresses) and whether the capacity cut
    /// them; nil when nothing could be unwound: another architecture than this machine's, no
    /// registers, or no stack bytes.
    package static func unwind(
        registers: [UInt64], stackStart: UInt64, stack: [UInt8], images: [LoadedImage],
        architecture: Architecture
    ) -> (frames: [UInt64], truncated: Bool)? {
        guard architecture == .current, architecture != .unknown, !registers.isEmpty, !stack.isEmpty
        else { return nil }
        // Images whose build id can be checked; text hashes and deleted files cannot.
        let usable = images.filter { !$0.isBuildIDTextHash && !$0.isDeleted && !$0.isPathTruncated }
        // The paths (NUL-terminated) and build ids, each in one buffer, found by offset.
        var paths: [CChar] = [], pathOffsets: [Int] = []
        var ids: [UInt8] = [], idOffsets: [Int] = [], idSizes: [UInt32] = []
        for image in usable {
            pathOffsets.append(paths.count)
            paths += image.path.utf8CString
            let id = Hex.decode(image.buildID) ?? []
            idOffsets.append(ids.count)
            idSizes.append(UInt32(id.count))
            ids += id
        }
        ids.append(0)  // never an empty buffer
        var frames = [UInt64](repeating: 0, count: capacity)
        var truncated: UInt32 = 0
        let count: UInt32 = paths.withUnsafeBufferPointer { pathBytes in
            ids.withUnsafeBufferPointer { idBytes in
                let remote: [aft_remote_image] = usable.indices.map { i in
                    aft_remote_image(
                        start: usable[i].start, end: usable[i].end, load_bias: usable[i].loadBias,
                        path: pathBytes.baseAddress! + pathOffsets[i], build_id: idBytes.baseAddress! + idOffsets[i],
                        build_id_size: idSizes[i])
                }
                return stack.withUnsafeBufferPointer { stackBytes in
                    var memory = aft_remote_memory(
                        start: stackStart, size: UInt64(stackBytes.count), bytes: stackBytes.baseAddress)
                    return registers.withUnsafeBufferPointer { regs in
                        remote.withUnsafeBufferPointer { imageBuffer in
                            withUnsafePointer(to: &memory) { memoryPointer in
                                var input = aft_remote_unwind_input(
                                    arch: architecture.code, register_count: UInt32(regs.count),
                                    registers: regs.baseAddress, memory: memoryPointer, memory_count: 1,
                                    image_count: UInt32(imageBuffer.count), images: imageBuffer.baseAddress)
                                return frames.withUnsafeMutableBufferPointer { out in
                                    aft_remote_unwind(&input, out.baseAddress, UInt32(out.count), &truncated)
                                }
                            }
                        }
                    }
                }
            }
        }
        guard count > 0 else { return nil }
        return (Array(frames.prefix(Int(count))), truncated != 0)
    }

    /// The crashing thread of a report, unwound from its own stack bytes.
    package static func unwindCrashingThread(of report: CrashReport) -> (frames: [UInt64], truncated: Bool)? {
        guard let thread = report.threads.first(where: \.crashed) else { return nil }
        return unwind(
            registers: report.registers, stackStart: thread.stackStart, stack: thread.stack,
            images: report.images, architecture: report.context.architecture)
    }
}

extension CrashReport {
    /// The threads whose frames the handler left to this launch (the crashing one and the
    /// paused ones whose whole stack is in the file): each unwound from its registers and stack
    /// memory with the images' unwind tables; without them (another architecture, no stack
    /// bytes), its frame pointers through the same bytes; else the pc alone.
    package mutating func unwindDeferredFrames() {
        unwindDeferredCrashingThread()
        for i in threads.indices where threads[i].unwinder == .deferred && !threads[i].crashed {
            unwoundAtNextLaunch = true
            let t = threads[i]
            if let unwound = RemoteUnwinder.unwind(
                registers: t.registers, stackStart: t.stackStart, stack: t.stack, images: images,
                architecture: context.architecture), unwound.frames.count > 1
            {
                // As many frames as the handler keeps for a thread that did not crash.
                let kept = Int(AFT_THREAD_MAX_FRAMES)
                threads[i].frames = Array(unwound.frames.prefix(kept))
                threads[i].framesTruncated = unwound.truncated || unwound.frames.count > kept
                threads[i].unwinder = .libunwind
            } else if let walked = FramePointerWalk.walk(thread: t, architecture: context.architecture),
                walked.frames.count > 1
            {
                let kept = Int(AFT_THREAD_MAX_FRAMES)
                threads[i].frames = Array(walked.frames.prefix(kept))
                threads[i].framesTruncated = walked.truncated || walked.frames.count > kept
                threads[i].unwinder = .framePointer
            } else {
                threads[i].unwinder = t.frames.isEmpty ? .none : .pcOnly
            }
        }
    }

    private mutating func unwindDeferredCrashingThread() {
        guard unwinder == .deferred else { return }
        unwoundAtNextLaunch = true
        let index = threads.firstIndex(where: \.crashed)
        if let unwound = RemoteUnwinder.unwindCrashingThread(of: self), unwound.frames.count > 1 {
            frames = unwound.frames
            framesTruncated = unwound.truncated
            unwinder = .libunwind
        } else if let index,
            let walked = FramePointerWalk.walk(thread: threads[index], architecture: context.architecture),
            walked.frames.count > 1
        {
            frames = walked.frames
            framesTruncated = walked.truncated
            unwinder = .framePointer
        } else {
            unwinder = frames.isEmpty ? .none : .pcOnly
        }
        if let index {
            threads[index].frames = frames
            threads[index].framesTruncated = framesTruncated
            threads[index].unwinder = unwinder
        }
    }
}

/// The frame-pointer chain through a thread's captured stack bytes: every read inside them, the
/// chain going up the stack only.
package enum FramePointerWalk {
    package static func walk(thread: CrashThread, architecture: Architecture) -> (frames: [UInt64], truncated: Bool)? {
        guard let fpIndex = fpIndex(architecture), thread.registers.count > fpIndex, thread.pc != 0 else { return nil }
        let start = thread.stackStart, stack = thread.stack
        func word(_ address: UInt64) -> UInt64? {
            guard address >= start, address - start <= UInt64(stack.count), UInt64(stack.count) - (address - start) >= 8
            else { return nil }
            let at = Int(address - start)
            return stack[at..<(at + 8)].reversed().reduce(0) { $0 << 8 | UInt64($1) }
        }
        var frames = [thread.pc]
        var fp = thread.registers[fpIndex]
        while frames.count < RemoteUnwinder.capacity, fp % 8 == 0, let next = word(fp), let ret = word(fp &+ 8) {
            let code = architecture == .arm64 ? ret & 0x0000_ffff_ffff_ffff : ret
            guard code != 0 else { break }
            frames.append(code)
            guard next > fp else { break }
            fp = next
        }
        return (frames, frames.count == RemoteUnwinder.capacity)
    }
}

extension CrashReport {
    /// Threads the kernel gave only sp and pc for (stopped, traced, blocking every signal, not
    /// answering) whose frame pointer the handler could not find by the unwind tables and a
    /// prologue, and guessed from the first frame record above sp. Here every frame record in
    /// the 4 KiB above sp is tried with the images' unwind tables, and the longest stack is kept
    /// where it is longer than the handler's, with that frame pointer in the thread's registers
    /// (for the minidump's readers too). Never for one the tables gave: a longer stack is then
    /// the stale records a deeper call left below its caller.
    package mutating func reunwindThreadsKnownBySPAndPC() {
        guard context.architecture == .current, let fpIndex = FramePointerWalk.fpIndex(context.architecture)
        else { return }
        for i in threads.indices
        where threads[i].contextSource == .syscall && !threads[i].isAftermath && !threads[i].framePointerFromTables {
            let t = threads[i]
            guard !t.stack.isEmpty, t.registers.count > fpIndex, t.pc != 0 else { continue }
            var best: (frames: [UInt64], truncated: Bool, fp: UInt64)?
            for fp in FramePointerWalk.frameRecords(in: t, images: images, within: 4096) {
                var registers = t.registers
                registers[fpIndex] = fp
                guard
                    let r = RemoteUnwinder.unwind(
                        registers: registers, stackStart: t.stackStart, stack: t.stack, images: images,
                        architecture: context.architecture)
                else { continue }
                if r.frames.count > (best?.frames.count ?? 0) { best = (r.frames, r.truncated, fp) }
            }
            guard let best, best.frames.count > t.frames.count else { continue }
            threads[i].frames = best.frames
            threads[i].framesTruncated = best.truncated
            threads[i].unwinder = .libunwind
            threads[i].registers[fpIndex] = best.fp
        }
    }
}

extension FramePointerWalk {
    /// The frame pointer's index in the registers of a crash file.
    package static func fpIndex(_ architecture: Architecture) -> Int? {
        switch architecture {
        case .x86_64: 10  // rbp in gregs order
        case .arm64: 29  // x29
        case .unknown: nil
        }
    }

    /// The frame records in a thread's stack bytes from its sp up to `within` bytes: an aligned
    /// word pointing further up the same stack, followed by a return address into an image.
    package static func frameRecords(in thread: CrashThread, images: [LoadedImage], within: UInt64) -> [UInt64] {
        let start = thread.stackStart, stack = thread.stack, end = start + UInt64(stack.count)
        func word(_ address: UInt64) -> UInt64? {
            guard address >= start, address + 8 <= end else { return nil }
            let at = Int(address - start)
            return stack[at..<(at + 8)].reversed().reduce(0) { $0 << 8 | UInt64($1) }
        }
        var records: [UInt64] = []
        var x = max(start, thread.sp) &+ 7 & ~7
        while x < min(end, thread.sp &+ within), records.count < 64 {
            if let next = word(x), next > x, next < end, let ret = word(x + 8),
                images.contains(where: { ret >= $0.start && ret < $0.end })
            {
                records.append(x)
            }
            x += 8
        }
        return records
    }
}
