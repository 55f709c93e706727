import AftermathNextLaunch
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension Commands {
    // MARK: minidump

    /// Writes a pending crash's minidump to -o FILE, or ID.dmp here.
    func minidump() throws(Failure) -> Int32 {
        let report = try find(arguments.operands[0], command: "minidump")
        guard report.kind == .crash else { throw fail("\(report.id) is a \(report.kind.rawValue), not a crash") }
        guard let crash = report.crash else { throw fail("the crash file of \(report.id) cannot be read") }
        let path = arguments.value("-o") ?? "\(report.id).dmp"
        let bytes = MinidumpWriter.write(crash)
        try Self.createFile(path, bytes).mapError { fail("cannot write \(path): \($0)") }.get()
        print("wrote \(path) (\(bytes.count) bytes, \(MinidumpWriter.threads(of: crash).count) threads)")
        return 0
    }

    /// Creates path (mode 0600; never over an existing file, never through a symbolic link)
    /// and writes bytes; a partial file is removed.
    static func createFile(_ path: String, _ bytes: [UInt8]) -> Result<Void, CreateError> {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            let error = errno
            var st = stat()
            let link = error == EEXIST && lstat(path, &st) == 0 && st.st_mode & S_IFMT == S_IFLNK
            return .failure(CreateError(errno: error, isLink: link))
        }
        var written = 0
        while written < bytes.count {
            let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + written, bytes.count - written) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else {
                let error = CreateError(errno: n < 0 ? errno : EIO)
                close(fd)
                unlink(path)
                return .failure(error)
            }
            written += n
        }
        guard close(fd) == 0 else {
            let error = CreateError(errno: errno)
            unlink(path)
            return .failure(error)
        }
        return .success(())
    }

    struct CreateError: Error, CustomStringConvertible {
        var errno: Int32
        /// What is there is a symbolic link.
        var isLink = false
        var description: String {
            if isLink { return "it is a symbolic link (not followed)" }
            return errno == EEXIST ? "it already exists (not overwritten)" : String(cString: strerror(errno))
        }
    }
}
