/// Why a report file was rejected instead of reported.
package enum ReportFileError: Error, Sendable, Hashable, CustomStringConvertible {
    /// A directory, symlink, device or other non-regular file where a report should be.
    case notARegularFile(kind: String)
    /// Larger than any report the writer can produce.
    case tooLarge(bytes: Int)
    /// Shorter than the fixed header.
    case truncatedHeader(bytes: Int)
    /// Not an Aftermath file.
    case badMagic(UInt32)
    /// Written by a format version this build cannot read.
    case unsupportedVersion(UInt16)
    /// The header declares an impossible size.
    case badHeaderSize(UInt16)
    /// A file kind this build does not know.
    case unknownKind(UInt32)
    /// The file's kind is not the one its directory holds.
    case unexpectedKind(UInt32)
    /// The writer never committed the file and nothing useful could be salvaged.
    case notCommitted
    /// The body is not as long as the header says (truncated or appended to).
    case bodySizeMismatch(expected: UInt64, actual: Int)
    /// The body's CRC-32 differs from the header's: the file was damaged.
    case checksumMismatch(expected: UInt32, actual: UInt32)
    /// A section every report must have is absent or malformed.
    case missingSection(String)
    /// The file could not be read.
    case unreadable(String)

    package var description: String {
        switch self {
        case .notARegularFile(let kind): return "not a regular file (\(kind))"
        case .tooLarge(let n): return "too large: \(n) bytes"
        case .truncatedHeader(let n): return "truncated: \(n) bytes, shorter than the header"
        case .badMagic(let m): return "not an Aftermath report (magic \(Hex.address(UInt64(m), width: 8)))"
        case .unsupportedVersion(let v): return "unsupported format version \(v)"
        case .badHeaderSize(let s): return "bad header size \(s)"
        case .unknownKind(let k): return "unknown report kind \(k)"
        case .unexpectedKind(let k): return "report kind \(k) in the wrong directory"
        case .notCommitted: return "never committed (the writer died) and nothing could be salvaged"
        case .bodySizeMismatch(let e, let a): return "body is \(a) bytes, header says \(e): truncated or damaged"
        case .checksumMismatch(let e, let a):
            return "CRC mismatch: header \(Hex.address(UInt64(e), width: 8)), body \(Hex.address(UInt64(a), width: 8))"
        case .missingSection(let s): return "missing or malformed section: \(s)"
        case .unreadable(let why): return "unreadable: \(why)"
        }
    }
}
