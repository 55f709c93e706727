import CSignalShim
import Foundation

/// The handled-error file format (aftermath_format.h): aft_file_header (kind AFT_KIND_ERROR, CRC and
/// commit over the body), then CONTEXT, ERROR, TEXT, FRAMES and IMAGES sections, and SWIFT_ASYNC when the
/// recording thread ran in a Swift task. Decoding is
/// strict about the header, lenient after it, like crash files.
package enum HandledErrorFile {
    /// The largest error file accepted.
    package static let maximumSize = 512 * 1024

    /// What one file holds, before decoding into ``HandledError``.
    package struct Content {
        package var context: aft_context
        package var info: aft_error_info
        package var type: [UInt8]
        package var message: [UInt8]
        package var fingerprint: [UInt8]?
        package var frames: [UInt64]
        package var images: [aft_image]
        /// The recording thread's Swift async callers (SWIFT_ASYNC), when it ran in a task.
        package var swiftAsync: [aft_swift_async_link]

        package init(
            context: aft_context, info: aft_error_info, type: [UInt8], message: [UInt8],
            fingerprint: [UInt8]? = nil, frames: [UInt64], images: [aft_image],
            swiftAsync: [aft_swift_async_link] = []
        ) {
            self.context = context
            self.info = info
            self.type = type
            self.message = message
            self.fingerprint = fingerprint
            self.frames = frames
            self.images = images
            self.swiftAsync = swiftAsync
        }
    }

    /// The file's bytes.
    package static func encode(_ c: Content) -> [UInt8] {
        var info = c.info
        info.type_size = UInt32(c.type.count)
        info.message_size = UInt32(c.message.count)
        info.fingerprint_size = UInt32(c.fingerprint?.count ?? 0)
        info.flags = c.fingerprint == nil ? 0 : UInt32(AFT_ERROR_HAS_FINGERPRINT)
        let textSize = c.type.count + c.message.count + (c.fingerprint?.count ?? 0)
        let headerSize = MemoryLayout<aft_file_header>.size
        var out = [UInt8]()
        out.reserveCapacity(headerSize + 5 * 16 + 1000 + 232 + textSize + c.frames.count * 8 + c.images.count * 328)
        out += [UInt8](repeating: 0, count: headerSize)
        func section<T>(_ type: UInt32, _ entries: [T]) {
            var h = aft_section_header(
                type: type, entry_size: UInt32(MemoryLayout<T>.stride), count: UInt32(entries.count), flags: 0)
            withUnsafeBytes(of: &h) { out += $0 }
            entries.withUnsafeBytes { out += $0 }
        }
        section(UInt32(AFT_SECTION_CONTEXT), [c.context])
        section(UInt32(AFT_SECTION_ERROR), [info])
        section(UInt32(AFT_SECTION_TEXT), c.type + c.message + (c.fingerprint ?? []))
        section(UInt32(AFT_SECTION_FRAMES), c.frames)
        section(UInt32(AFT_SECTION_IMAGES), c.images)
        if !c.swiftAsync.isEmpty { section(UInt32(AFT_SECTION_SWIFT_ASYNC), c.swiftAsync) }
        var header = aft_file_header()
        header.magic = AFT_MAGIC
        header.version = UInt16(AFT_FORMAT_VERSION)
        header.header_size = UInt16(headerSize)
        header.kind = AFT_KIND_ERROR
        header.body_size = UInt64(out.count - headerSize)
        header.body_crc = out.withUnsafeBytes { aft_crc32(0, $0.baseAddress! + headerSize, $0.count - headerSize) }
        header.commit = AFT_COMMIT_MARKER
        withUnsafeBytes(of: &header) { raw in out.withUnsafeMutableBytes { $0.copyMemory(from: raw) } }
        return out
    }

    /// Decodes a file's bytes.
    package static func decode(_ bytes: [UInt8]) throws(ReportFileError) -> HandledError {
        let h = try FileHeader.validate(bytes, kinds: .error, maximumSize: maximumSize)
        guard h.commit == AFT_COMMIT_MARKER else { throw .notCommitted }
        let start = Int(h.header_size)
        try FileHeader.verifyBody(bytes, header: h, start: start, length: bytes.count - start)

        var context: aft_context?, info: aft_error_info?, text: [UInt8] = []
        var frames: [UInt64] = [], images: [aft_image] = [], links: [aft_swift_async_link] = []
        bytes.withUnsafeBytes { raw in
            var offset = start
            let sh = MemoryLayout<aft_section_header>.size
            while offset + sh <= raw.count {
                let s = raw.loadUnaligned(fromByteOffset: offset, as: aft_section_header.self)
                offset += sh
                let size = Int(s.entry_size)
                guard size > 0, size <= maximumSize else { return }
                let count = min(Int(s.count), (raw.count - offset) / size)
                func entries<T>(_: T.Type, capacity: Int) -> [T] {
                    guard size >= MemoryLayout<T>.size else { return [] }
                    return (0..<min(count, capacity)).map {
                        raw.loadUnaligned(fromByteOffset: offset + $0 * size, as: T.self)
                    }
                }
                switch s.type {
                case UInt32(AFT_SECTION_CONTEXT): context = entries(aft_context.self, capacity: 1).first
                case UInt32(AFT_SECTION_ERROR): info = entries(aft_error_info.self, capacity: 1).first
                case UInt32(AFT_SECTION_TEXT): text = entries(UInt8.self, capacity: maximumSize)
                case UInt32(AFT_SECTION_FRAMES): frames = entries(UInt64.self, capacity: Int(AFT_ERROR_MAX_FRAMES))
                case UInt32(AFT_SECTION_IMAGES): images = entries(aft_image.self, capacity: Int(AFT_MAX_IMAGES))
                case UInt32(AFT_SECTION_SWIFT_ASYNC):
                    links = entries(aft_swift_async_link.self, capacity: Int(AFT_SWIFT_ASYNC_MAX_LINKS))
                default: break
                }
                let declared = Int(s.count).multipliedReportingOverflow(by: size)
                guard !declared.overflow, offset + declared.partialValue <= raw.count else { return }
                offset += declared.partialValue
            }
        }
        guard let context else { throw .missingSection("context") }
        guard var info else { throw .missingSection("error") }
        // Sizes come from the file: clamp each to what the text section holds.
        var rest = text[...]
        func take(_ n: UInt32) -> String {
            let part = rest.prefix(Int(n))
            rest = rest.dropFirst(part.count)
            return String(decoding: part, as: UTF8.self)
        }
        let type = take(info.type_size)
        let message = take(info.message_size)
        let fingerprint = take(info.fingerprint_size)
        let previous = UUID(bytes: &info.previous_session_id)
        let screen = CString.read(&info.screen)
        var error = HandledError(
            context: ReportContext(context), type: type, message: message,
            fingerprint: info.flags & UInt32(AFT_ERROR_HAS_FINGERPRINT) != 0 ? fingerprint : nil,
            timeUnixNano: info.time_realtime_ns, threadID: info.thread_id, isMainThread: info.is_main_thread != 0,
            frames: frames, images: images.map(LoadedImage.init),
            previousSessionID: previous.bytes.allSatisfy { $0 == 0 } ? nil : previous,
            screen: screen.isEmpty ? nil : screen, errorID: UUID(bytes: &info.error_id))
        error.asyncChain = SwiftAsyncChain.chains(from: links)[info.thread_id]
        return error
    }
}
