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
