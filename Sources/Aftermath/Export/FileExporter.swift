import AftermathNextLaunch
import CSignalShim
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Writes each batch as one OTLP/JSON `ExportLogsServiceRequest` file in a directory, and
/// each attachment (a crash's minidump) as `<apsio.attachment.id>.dmp` beside them.
///
/// Batch files are named `<timeUnixNano of now>-<UUID>.json`. Every file is mode 0600 (the
/// directory, when it creates it, 0700), written under a hidden temporary name
/// (`.<name>.<UUID>.tmp`) created new without following a link and locked while it is written,
/// flushed with `fsync`, renamed into place and its directory synced, so a reader never sees a
/// partial file and a returned export survives a power loss. The temporary file of a writer
/// that died (a process that crashed or was killed while it exported) is removed by the first
/// export of a later process into the same directory. While a crash of this process is in
/// progress nothing is written nor renamed into place: the export throws, the reports stay
/// for the next launch. An attachment delivered again replaces its earlier copy (the same
/// bytes). Any failure (the directory cannot be created, is read-only, the disk is full)
/// throws ``ExportError``. A batch without records writes nothing.
public struct FileExporter: LogExporter, AttachmentExporter {
    /// The directory the files are written to; created, with its parents, if missing.
    public let directory: String

    /// Creates an exporter writing into `directory`.
    public init(directory: String) {
        self.directory = directory
    }

    /// Writes `batch` to a new file; throws ``ExportError`` if the file is not durably written.
    public func export(_ batch: LogBatch) throws {
        guard !batch.records.isEmpty else { return }
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let nanos = UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
        try store(OTLPJSON.encode(batch), named: "\(nanos)-\(UUID().uuidString).json")
    }

    /// Writes `attachment` as `<id>.dmp` and returns that file's path; throws ``ExportError``
    /// if it is not durably written, or refuses for good an id that cannot name a file.
    public func export(_ attachment: Attachment) throws -> String? {
        guard Attachment.isValidID(attachment.id) else {
            throw ExportError(
                "FileExporter: attachment id \(attachment.id.prefix(80)) cannot name a file",
                kind: .rejectedByCollector("attachment id is not 1-64 letters, digits, - or _"))
        }
        return try store(attachment.bytes, named: attachment.id + ".dmp")
    }

    /// Directories this process has already cleared of dead writers' temporary files.
    private static let swept = Mutex<Set<String>>([])

    @discardableResult
    private func store(_ bytes: [UInt8], named name: String) throws -> String {
        try Self.refuseWhileCrashing()
        do {
            var st = stat()
            if lstat(directory, &st) != 0 {
                try FileManager.default.createDirectory(
                    atPath: directory, withIntermediateDirectories: true,
                    attributes: [.posixPermissions: 0o700])
                _ = chmod(directory, 0o700)  // whatever the umask
            }
        } catch {
            throw ExportError("FileExporter: cannot create directory \(directory) (\(error))")
        }
        if Self.swept.withLock({ $0.insert(directory).inserted }) { Self.removeDeadTemporaries(in: directory) }
        let path = (directory as NSString).appendingPathComponent(name)
        let temporary = (directory as NSString).appendingPathComponent(".\(name).\(UUID().uuidString).tmp")

        // New (O_EXCL), no link followed, 0600 whatever the umask; locked until closed, so that
        // no other export takes it for a dead writer's.
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw ExportError("FileExporter: cannot create \(temporary)", code: errno) }
        do {
            defer { close(fd) }
            // Where the file system has no flock, nothing is taken for a dead writer's either.
            // Between its creation and the lock, another export could take it for one: then it
            // holds the lock, or has removed the file.
            let taken = flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK
            var st = stat()
            guard !taken, fstat(fd, &st) == 0, st.st_nlink > 0 else {
                throw ExportError("FileExporter: \(temporary) was removed as it was created")
            }
            guard fchmod(fd, 0o600) == 0 else {
                throw ExportError("FileExporter: cannot chmod \(temporary)", code: errno)
            }
            try Self.writeAll(fd, bytes, path: temporary)
            guard fsync(fd) == 0 else { throw ExportError("FileExporter: cannot sync \(temporary)", code: errno) }
            // The rename is the commit: never made once a crash has begun, which would end the
            // process before the caller deletes what this export holds.
            try Self.refuseWhileCrashing()
            // rename replaces a link at path itself, never what it points to.
            guard rename(temporary, path) == 0 else {
                throw ExportError("FileExporter: cannot rename \(temporary) to \(path)", code: errno)
            }
        } catch {
            unlink(temporary)
            throw error
        }
        // Make the rename itself durable.
        let dirFD = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dirFD >= 0 {
            defer { close(dirFD) }
            guard fsync(dirFD) == 0 else { throw ExportError("FileExporter: cannot sync \(directory)", code: errno) }
        }
        return path
    }

    /// Throws while a crash of this process is in progress: the process dies before the
    /// caller could delete what it exported, and the next launch would send it again.
    private static func refuseWhileCrashing() throws {
        guard aft_crash_in_progress() == 0 else {
            throw ExportError(
                "FileExporter: this process is crashing; nothing written (the next launch exports it)",
                kind: .unavailable)
        }
    }

    /// Removes the temporary files (`.*.tmp`) in directory that no writer holds locked: those
    /// of exports a process did not live to finish. A writer of this process holds its own
    /// (flock locks of two opens conflict within a process too).
    static func removeDeadTemporaries(in directory: String) {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return }
        for name in names where name.hasPrefix(".") && name.hasSuffix(".tmp") {
            let path = (directory as NSString).appendingPathComponent(name)
            let fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
            guard fd >= 0 else { continue }
            var st = stat()
            if fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG, flock(fd, LOCK_EX | LOCK_NB) == 0 {
                unlink(path)
            }
            close(fd)
        }
    }

    private static func writeAll(_ fd: Int32, _ bytes: [UInt8], path: String) throws {
        try bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = write(fd, buffer.baseAddress! + offset, buffer.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    throw ExportError("FileExporter: cannot write \(path)", code: errno)
                }
                offset += written
            }
        }
    }
}
