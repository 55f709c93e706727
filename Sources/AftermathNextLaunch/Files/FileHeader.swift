import CSignalShim
import Foundation

/// The checks every Aftermath file's fixed header passes before anything after it is read:
/// size, magic, version, header size, kind; and, for a committed body, its size and CRC-32.
package enum FileHeader {
    /// A set of file kinds, one bit each: no array to allocate for every file a launch reads.
    package struct Kinds: OptionSet, Sendable {
        package let rawValue: UInt32
        package init(rawValue: UInt32) { self.rawValue = rawValue }
        /// The set holding kind alone (AFT_KIND_*; empty for a kind beyond the set's bits).
        package init(_ kind: UInt32) { rawValue = kind < 32 ? 1 << kind : 0 }

        package static var crash: Kinds { Kinds(UInt32(AFT_KIND_CRASH)) }
        package static var hang: Kinds { Kinds(UInt32(AFT_KIND_HANG)) }
        package static var run: Kinds { Kinds(UInt32(AFT_KIND_RUN)) }
        package static var error: Kinds { Kinds(UInt32(AFT_KIND_ERROR)) }
        /// Every kind this build knows (a known kind in the wrong place is `unexpectedKind`).
        /// Unions, not an array literal, whose storage's type the runtime would build by name.
        package static var known: Kinds { crash.union(hang).union(run).union(error) }

        /// Whether kind (a header's, any value) is in the set.
        package func holds(_ kind: UInt32) -> Bool { !Kinds(kind).isEmpty && contains(Kinds(kind)) }
    }

    /// Whether the open file fd's header says it is committed (magic and commit marker), read
    /// without anything else: a crash's reserve, committed in place by its handler, is a report.
    package static func isCommitted(fd: Int32) -> Bool {
        var header = aft_file_header()
        let size = MemoryLayout<aft_file_header>.size
        let got = withUnsafeMutableBytes(of: &header) { pread(fd, $0.baseAddress, size, 0) }
        return got == size && header.magic == AFT_MAGIC && header.commit == AFT_COMMIT_MARKER
    }

    /// Whether the file at path is a crash report as it lies: `<id>.crash`, or a reserve
    /// (`.crash.tmp`) its handler committed in place, which the next launch names. For what
    /// looks at crashes/ before that launch (the debug command, the harness).
    package static func holdsCrashReport(_ path: String) -> Bool {
        if path.hasSuffix(".crash") { return true }
        guard path.hasSuffix(".crash.tmp") else { return false }
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        return isCommitted(fd: fd)
    }

    /// The header of bytes, when it is one of kinds; strict.
    package static func validate(
        _ bytes: [UInt8], kinds: Kinds, maximumSize: Int
    ) throws(ReportFileError) -> aft_file_header {
        try bytes.withRawBytes { raw throws(ReportFileError) in
            try validate(raw, kinds: kinds, maximumSize: maximumSize)
        }
    }

    /// ``validate(_:kinds:maximumSize:)`` of bytes in memory of the caller's.
    package static func validate(
        _ bytes: UnsafeRawBufferPointer, kinds: Kinds, maximumSize: Int
    ) throws(ReportFileError) -> aft_file_header {
        let headerSize = MemoryLayout<aft_file_header>.size
        guard bytes.count <= maximumSize else { throw .tooLarge(bytes: bytes.count) }
        guard bytes.count >= headerSize else { throw .truncatedHeader(bytes: bytes.count) }
        let h = bytes.loadUnaligned(as: aft_file_header.self)
        guard h.magic == AFT_MAGIC else { throw .badMagic(h.magic) }
        guard h.version >= AFT_FORMAT_MIN_VERSION, h.version <= AFT_FORMAT_VERSION else {
            throw .unsupportedVersion(h.version)
        }
        guard Int(h.header_size) >= headerSize, Int(h.header_size) <= bytes.count else {
            throw .badHeaderSize(h.header_size)
        }
        guard kinds.holds(h.kind) else {
            throw Kinds.known.holds(h.kind) ? .unexpectedKind(h.kind) : .unknownKind(h.kind)
        }
        return h
    }

    /// Checks that the body (length bytes from start) is the committed one: its size and CRC.
    package static func verifyBody(
        _ bytes: [UInt8], header h: aft_file_header, start: Int, length: Int
    ) throws(ReportFileError) {
        try bytes.withRawBytes { raw throws(ReportFileError) in
            try verifyBody(raw, header: h, start: start, length: length)
        }
    }

    /// ``verifyBody(_:header:start:length:)`` of bytes in memory of the caller's.
    package static func verifyBody(
        _ bytes: UnsafeRawBufferPointer, header h: aft_file_header, start: Int, length: Int
    ) throws(ReportFileError) {
        guard h.body_size == UInt64(length), start + length <= bytes.count else {
            throw .bodySizeMismatch(expected: h.body_size, actual: bytes.count - start)
        }
        let crc = aft_crc32(0, bytes.baseAddress! + start, length)
        guard crc == h.body_crc else { throw .checksumMismatch(expected: h.body_crc, actual: crc) }
    }
}
