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
        var st = stat()
        guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG else {
            throw .notARegularFile(kind: "changed while opening")
        }
        guard Int(st.st_size) <= maximumSize else { throw .tooLarge(bytes: Int(st.st_size)) }
        var bytes = [UInt8](repeating: 0, count: Int(st.st_size) + 1)
        var used = 0
        while used < bytes.count {
            let n = bytes.withUnsafeMutableBytes { raw in
                pread(fd, raw.baseAddress! + used, raw.count - used, off_t(used))
            }
            if n < 0 {
                if errno == EINTR { continue }
                throw .unreadable(String(cString: strerror(errno)))
            }
            if n == 0 { break }
            used += n
        }
        guard used <= maximumSize else { throw .tooLarge(bytes: used) }
        // Truncated in place: a copy of the prefix would have the runtime build the array
        // storage's type by name, at start's first file.
        bytes.removeSubrange(used...)
        return bytes
    }
}
