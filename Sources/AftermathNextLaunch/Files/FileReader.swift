#if canImport(Glibc)
import Glibc
#endif

/// Reads report files defensively: no symlinks followed, regular files only, bounded size.
package enum FileReader {
    /// The file's bytes. followingLinks: for a system file (os-release) whose link is the
    /// norm; the file it names must still be a regular one within maximumSize.
    package static func read(
        _ path: String, maximumSize: Int = ReportFile.maximumSize, followingLinks: Bool = false
    ) throws(ReportFileError) -> [UInt8] {
        var st = stat()
        if !followingLinks {
            guard lstat(path, &st) == 0 else { throw .unreadable(String(cString: strerror(errno))) }
            switch st.st_mode & S_IFMT {
            case S_IFREG: break
            case S_IFDIR: throw .notARegularFile(kind: "a directory")
            case S_IFLNK: throw .notARegularFile(kind: "a symbolic link")
            case S_IFIFO: throw .notARegularFile(kind: "a FIFO")
            case S_IFSOCK: throw .notARegularFile(kind: "a socket")
            default: throw .notARegularFile(kind: "a device")
            }
        }
        // O_NONBLOCK: a FIFO put in a file's place never holds the reader; fstat refuses it.
        let fd = open(path, O_RDONLY | (followingLinks ? 0 : O_NOFOLLOW) | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { throw .unreadable(String(cString: strerror(errno))) }
        defer { close(fd) }
        return try read(fd: fd, maximumSize: maximumSize)
    }

    /// The bytes of the file open at fd, read from its start: a regular file within
    /// maximumSize. The caller opened it as ``read(_:maximumSize:followingLinks:)`` does
    /// (without following a link, non-blocking) and closes it.
    package static func read(fd: Int32, maximumSize: Int) throws(ReportFileError) -> [UInt8] {
        let size = try regularFileSize(fd: fd, maximumSize: maximumSize)
        var bytes = [UInt8](repeating: 0, count: size + 1)
        let used = try bytes.withUnsafeMutableBytes { raw in
            Result { () throws(ReportFileError) -> Int in try readAll(fd: fd, into: raw, maximumSize: maximumSize) }
        }.get()
        // Truncated in place: a copy of the prefix would have the runtime build the array
        // storage's type by name, at start's first file.
        bytes.removeSubrange(used...)
        return bytes
    }

    /// Calls body with the bytes of the file open at fd, read as ``read(fd:maximumSize:)``
    /// reads them, into memory of the call's own (the stack, or the heap when large), and
    /// returns its result. No array: start's reads (os-release, the run that ended last) make
    /// none, so that an app that makes none never has the runtime register the standard
    /// library's prespecialized array types (about 60 µs, once a process).
    package static func withBytes<R>(
        fd: Int32, maximumSize: Int, _ body: (UnsafeRawBufferPointer) throws(ReportFileError) -> R
    ) throws(ReportFileError) -> R {
        let size = try regularFileSize(fd: fd, maximumSize: maximumSize)
        return try withUnsafeTemporaryAllocation(byteCount: size + 1, alignment: 16) {
            (raw) throws(ReportFileError) -> R in
            let used = try readAll(fd: fd, into: raw, maximumSize: maximumSize)
            return try body(UnsafeRawBufferPointer(rebasing: raw[..<used]))
        }
    }

    /// The size of the regular file open at fd, within maximumSize.
    static func regularFileSize(fd: Int32, maximumSize: Int) throws(ReportFileError) -> Int {
        var st = stat()
        guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG else {
            throw .notARegularFile(kind: "changed while opening")
        }
        guard Int(st.st_size) <= maximumSize else { throw .tooLarge(bytes: Int(st.st_size)) }
        return Int(st.st_size)
    }

    /// Reads the file open at fd from its start into raw (its size and a byte more: a file that
    /// grew since is seen), until its end; the bytes read, within maximumSize.
    static func readAll(
        fd: Int32, into raw: UnsafeMutableRawBufferPointer, maximumSize: Int
    ) throws(ReportFileError)
        -> Int
    {
        var used = 0
        while used < raw.count {
            let n = pread(fd, raw.baseAddress! + used, raw.count - used, off_t(used))
            if n < 0 {
                if errno == EINTR { continue }
                throw .unreadable(String(cString: strerror(errno)))
            }
            if n == 0 { break }
            used += n
        }
        guard used <= maximumSize else { throw .tooLarge(bytes: used) }
        return used
    }
}

extension Array where Element == UInt8 {
    /// withUnsafeBytes for a body that throws a ReportFileError, which it throws as such (the
    /// standard library's rethrows any Error).
    package func withRawBytes<R>(
        _ body: (UnsafeRawBufferPointer) throws(ReportFileError) -> R
    ) throws(ReportFileError) -> R {
        try withUnsafeBytes { raw in Result { () throws(ReportFileError) in try body(raw) } }.get()
    }
}
