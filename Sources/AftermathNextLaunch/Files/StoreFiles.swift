#if canImport(Glibc)
import Glibc
#endif
import CSignalShim

/// The file-system calls the store makes on paths it found on disk or read from a file: none
/// blocks, none follows a symbolic link, every file it creates is new (O_EXCL) and 0600.
package enum StoreFiles {
    /// One directory entry, as lstat saw it.
    package struct Entry: Sendable {
        package var name: String
        /// S_IFREG, S_IFDIR, S_IFIFO, ... (st_mode & S_IFMT).
        package var type: mode_t
        /// Seconds since the epoch of the last modification.
        package var modified: Double
        package var isRegular: Bool { type == S_IFREG }

        /// What a non-regular entry is, in words.
        package var typeDescription: String { StoreFiles.describe(type) }
    }

    /// Words for a file type (st_mode & S_IFMT).
    package static func describe(_ type: mode_t) -> String {
        switch type {
        case S_IFREG: return "a regular file"
        case S_IFDIR: return "a directory"
        case S_IFLNK: return "a symbolic link"
        case S_IFIFO: return "a FIFO"
        case S_IFSOCK: return "a socket"
        default: return "a device"
        }
    }

    /// How a ``walk(_:_:)`` ended.
    package enum Walk {
        case ended, stopped, failed
        case cannotOpen(Int32)
    }

    /// Each entry of the directory at path (its name's bytes with the NUL, inode, d_type, the
    /// directory's descriptor) to body until it returns false. With getdents64(2)
    /// (aft_dir_reader): no DIR, its allocation and two fcntl calls, for every directory a
    /// delivery lists. Non-blocking, without following a final link.
    package static func walk(
        _ path: String,
        _ body: (_ name: UnsafeRawBufferPointer, _ inode: UInt64, _ type: UInt8, _ directory: Int32) -> Bool
    ) -> Walk {
        var reader = aft_dir_reader()
        let error = aft_dir_reader_open(&reader, path)
        guard error == 0 else { return .cannotOpen(error) }
        defer { aft_dir_reader_close(&reader) }
        while true {
            errno = 0
            var inode: UInt64 = 0
            var type: UInt8 = 0
            guard let name = aft_dir_reader_next(&reader, &inode, &type) else { return errno == 0 ? .ended : .failed }
            if !body(UnsafeRawBufferPointer(start: name, count: strlen(name) + 1), inode, type, reader.fd) {
                return .stopped
            }
        }
    }

    /// The entries of dir, sorted by name; hidden names skipped. One lstat each (relative to the
    /// open directory), no open of any entry: a FIFO, socket or device costs nothing here.
    /// A name statting refuses is not lstat'ed where the directory says it is a regular file:
    /// its `modified` is nan (not read).
    package static func entries(_ dir: String, statting: (String) -> Bool = { _ in true }) -> [Entry] {
        var out: [Entry] = []
        _ = walk(dir) { raw, _, type, directory in
            let name = String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            guard !name.hasPrefix(".") else { return true }
            if Int(type) == Int(DT_REG), !statting(name) {
                out.append(Entry(name: name, type: S_IFREG, modified: .nan))
                return true
            }
            var st = stat()
            guard fstatat(directory, name, &st, AT_SYMLINK_NOFOLLOW) == 0 else { return true }
            out.append(
                Entry(
                    name: name, type: st.st_mode & S_IFMT,
                    modified: Double(st.st_mtim.tv_sec) + Double(st.st_mtim.tv_nsec) / 1e9))
            return true
        }
        return stablySorted(out) { $0.name < $1.name }
    }

    /// items sorted by less, equal ones in their order: a bottom-up merge sort. The standard
    /// library's sort of more than 20 elements keeps its runs in an array of ranges, a type the
    /// runtime builds by name at its first use in a process, with a scan of every loaded
    /// conformance record: about 70 µs of each launch's delivery (64 run files to list).
    package static func stablySorted<T>(_ items: [T], by less: (T, T) -> Bool) -> [T] {
        var from = items
        var into = items
        let n = items.count
        var width = 1
        while width < n {
            var low = 0
            while low < n {
                let middle = Swift.min(low + width, n)
                let high = Swift.min(low + 2 * width, n)
                var left = low
                var right = middle
                for k in low..<high {
                    if right < high && (left >= middle || less(from[right], from[left])) {
                        into[k] = from[right]
                        right += 1
                    } else {
                        into[k] = from[left]
                        left += 1
                    }
                }
                low = high
            }
            swap(&from, &into)
            width *= 2
        }
        return from
    }

    /// Counts the names in dir ending with suffix, stopping at limit (no stat, no sort).
    package static func count(in dir: String, suffix: String, upTo limit: Int) -> Int {
        var n = 0
        _ = walk(dir) { raw, _, _, _ in
            guard n < limit else { return false }
            if String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self).hasSuffix(suffix) { n += 1 }
            return n < limit
        }
        return n
    }

    /// Creates path (it must not exist; a link there is not followed) with mode 0600 whatever
    /// the umask, and writes bytes. Returns 0 or the errno.
    package static func createExclusive(_ path: String, _ bytes: [UInt8]) -> Int32 {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0o600)
        guard fd >= 0 else { return errno }
        defer { close(fd) }
        guard fchmod(fd, 0o600) == 0 else { return errno }
        return writeAll(fd, bytes)
    }

    /// Writes all of bytes to fd. Returns 0 or the errno.
    package static func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Int32 {
        var written = 0
        while written < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + written, $0.count - written) }
            if n < 0 {
                if errno == EINTR { continue }
                return errno
            }
            if n == 0 { return EIO }
            written += n
        }
        return 0
    }

    /// Moves from to to without replacing anything at to: renameat2(2) with RENAME_NOREPLACE
    /// fails when to exists (a planted symlink included) and never follows a link at from.
    /// Where the kernel or file system has no such rename, link(2) then unlink(2), and on a file
    /// system without hard links rename after checking to is absent. Returns 0 or errno.
    package static func moveNoReplace(_ from: String, _ to: String) -> Int32 {
        // One step: a process that dies in it leaves the file under one name or the other.
        let renamed = aft_rename_noreplace(from, to)
        guard renamed == EINVAL || renamed == ENOSYS else { return renamed }
        // No such rename here (an older kernel or file system): a link, then the old name
        // removed. A process that dies between them leaves both names, which the next
        // collection tells by the report's id.
        if link(from, to) == 0 {
            return unlink(from) == 0 ? 0 : errno
        }
        let err = errno
        guard err == EPERM || err == EOPNOTSUPP || err == EXDEV || err == EMLINK else { return err }
        var st = stat()
        guard lstat(to, &st) != 0 else { return EEXIST }
        return rename(from, to) == 0 ? 0 : errno
    }

    /// Opens path for locking: non-blocking, no symlink, created 0600 if absent, and only a
    /// regular file is accepted. Returns the descriptor, or the reason it cannot be used.
    package static func openLockFile(_ path: String) -> Result<Int32, LockFileError> {
        let fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0o600)
        guard fd >= 0 else { return .failure(LockFileError(path: path, reason: String(cString: strerror(errno)))) }
        var st = stat()
        guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG else {
            close(fd)
            return .failure(LockFileError(path: path, reason: "not a regular file (\(describe(st.st_mode & S_IFMT)))"))
        }
        if st.st_uid == geteuid(), st.st_mode & 0o777 != 0o600 { _ = fchmod(fd, 0o600) }
        return .success(fd)
    }

    /// Why a lock file could not be used.
    package struct LockFileError: Error, Sendable {
        package var path: String
        package var reason: String
        package var description: String { "cannot use \(path): \(reason)" }
    }
}
