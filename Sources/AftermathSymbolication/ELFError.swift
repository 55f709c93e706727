import AftermathNextLaunch
/// Why an ELF file could not be loaded by ``ELFSymbolTable``.
package enum ELFError: Error, Sendable, Equatable, CustomStringConvertible {
    /// `open(2)` or `fstat(2)` failed with the given `errno`.
    case cannotOpen(path: String, errno: Int32)
    /// The path names something other than a regular file.
    case notRegularFile(path: String)
    /// `pread(2)` failed with the given `errno`.
    case readFailed(errno: Int32)
    /// The file does not start with the ELF magic bytes.
    case notELF
    /// The file is ELF, but not 64-bit little-endian x86-64/aarch64 `ET_EXEC`/`ET_DYN`.
    case unsupported(String)
    /// A structure (`what`) lies outside the file or has an impossible size.
    case outOfBounds(what: String, offset: UInt64, size: UInt64, fileSize: UInt64)
    /// A header field holds an inconsistent value.
    case malformed(String)
    /// The file is larger than any image (``ELFSymbolTable`` refuses it unread).
    case tooLarge(path: String, size: UInt64)
    /// The file's build id is not the one expected: not the image that was loaded.
    case buildIDMismatch

    package var description: String {
        switch self {
        case let .cannotOpen(path, err): return "cannot open \(path): errno \(err)"
        case let .notRegularFile(path): return "\(path) is not a regular file"
        case let .readFailed(err): return "read failed: errno \(err)"
        case .notELF: return "not an ELF file"
        case let .unsupported(why): return "unsupported ELF file: \(why)"
        case let .outOfBounds(what, offset, size, fileSize):
            return "\(what) (offset \(offset), size \(size)) lies outside the file (size \(fileSize))"
        case let .malformed(why): return "malformed ELF file: \(why)"
        case let .tooLarge(path, size): return "\(path) is \(size) bytes, larger than any image; refused"
        case .buildIDMismatch: return "build id differs from the image's"
        }
    }
}
