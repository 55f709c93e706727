import AftermathNextLaunch
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// The file access and little-endian decoding ELFSymbolTable's parser uses.
// MARK: - File access

/// A read-only file descriptor with bounds-checked positional reads.
struct ELFFile {
    package let fd: Int32
    package let size: UInt64

    package init(path: String) throws(ELFError) {
        // O_NONBLOCK so that a FIFO cannot hang us before the regular-file check. Symlinks are
        // followed: /usr/lib/debug/.build-id entries are links; the build id is the check.
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { throw .cannotOpen(path: path, errno: errno) }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            let err = errno
            elfCloseDescriptor(fd)
            throw .cannotOpen(path: path, errno: err)
        }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            elfCloseDescriptor(fd)
            throw .notRegularFile(path: path)
        }
        guard UInt64(max(0, info.st_size)) <= Self.maximumSize else {
            elfCloseDescriptor(fd)
            throw .tooLarge(path: path, size: UInt64(info.st_size))
        }
        self.fd = fd
        self.size = UInt64(max(0, info.st_size))
    }

    /// Larger files are refused: no image a crash names comes near it.
    package static let maximumSize: UInt64 = 2 << 30

    package func close() { elfCloseDescriptor(fd) }

    /// Throws unless `[offset, offset + size)` lies inside the file.
    package func check(_ what: String, offset: UInt64, size: UInt64) throws(ELFError) {
        let (end, overflow) = offset.addingReportingOverflow(size)
        guard !overflow, end <= self.size else {
            throw .outOfBounds(what: what, offset: offset, size: size, fileSize: self.size)
        }
    }

    /// Reads exactly `size` bytes at `offset`, after checking they lie inside the file.
    package func read(_ what: String, offset: UInt64, size: UInt64) throws(ELFError) -> [UInt8] {
        try check(what, offset: offset, size: size)
        guard size > 0 else { return [] }
        let count = Int(size)
        var bytes = [UInt8](repeating: 0, count: count)
        var done = 0
        while done < count {
            let n = bytes.withUnsafeMutableBytes { buffer in
                pread(fd, buffer.baseAddress! + done, count - done, off_t(offset) + off_t(done))
            }
            if n < 0 {
                if errno == EINTR { continue }
                throw .readFailed(errno: errno)
            }
            // The file shrank under us: report as truncated rather than returning zeros.
            guard n > 0 else {
                throw .outOfBounds(what: what, offset: offset, size: size, fileSize: UInt64(done) + offset)
            }
            done += n
        }
        return bytes
    }
}

// MARK: - Little-endian decoding

extension Array where Element == UInt8 {
    /// Little-endian integer at `offset`; callers guarantee the bytes are in range.
    func elfLE<T: FixedWidthInteger>(_ offset: Int, as _: T.Type = T.self) -> T {
        precondition(offset >= 0 && offset + MemoryLayout<T>.size <= count)
        return withUnsafeBytes { T(littleEndian: $0.loadUnaligned(fromByteOffset: offset, as: T.self)) }
    }
}

func elfCloseDescriptor(_ fd: Int32) {
    _ = close(fd)
}
