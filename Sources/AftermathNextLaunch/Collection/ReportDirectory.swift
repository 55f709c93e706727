import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The on-disk layout of one app's reports: crashes/, hangs/, runs/, errors/, rejected/ and,
/// once a crash has an attachment, attachments/.
package struct ReportDirectory: Sendable, Hashable {
    /// The root directory.
    package let root: String
    /// Crash files written by the signal handler.
    package let crashes: String
    /// Hang files written by the watchdog.
    package let hangs: String
    /// One file per run.
    package let runs: String
    /// Handled errors waiting to be exported.
    package let errors: String
    /// Files that could not be used, each with a `.reason` beside it.
    package let rejected: String
    /// Attachments (crashes' minidumps) waiting for their exporter's acknowledgement.
    package let attachments: String
    /// The lock file a delivery holds (fcntl), so that two processes never deliver at once.
    package let deliveryLock: String

    /// Uses root as the reports directory. Its directories' paths are built once and kept:
    /// the first release of a String of 63 bytes or more in a process has the Swift runtime
    /// look a type up by name (its breadcrumbs'), about 0.06-0.1 ms, and start's own would
    /// have paid it on the app's thread wherever the reports directory's path is long.
    package init(root: String) {
        self.root = root
        crashes = Self.join(root, "crashes")
        hangs = Self.join(root, "hangs")
        runs = Self.join(root, "runs")
        errors = Self.join(root, "errors")
        rejected = Self.join(root, "rejected")
        attachments = Self.join(root, "attachments")
        deliveryLock = Self.join(root, ".deliver.lock")
    }

    /// The default for a service, the first usable of:
    /// - `$STATE_DIRECTORY/aftermath/<serviceName>` (systemd's `StateDirectory=`; the first
    ///   path when it lists several),
    /// - `$XDG_STATE_HOME/aftermath/<serviceName>`,
    /// - `~/.local/state/aftermath/<serviceName>` when `HOME` is an existing, writable directory,
    /// - `/var/tmp/aftermath-<uid>/<serviceName>` (a service user without a home: `nobody`,
    ///   `DynamicUser=`), else `/tmp/aftermath-<uid>/<serviceName>` when /var/tmp is unusable.
    package static func defaultRoot(
        serviceName: String,
        environment env: [String: String] = ProcessInfo.processInfo.environment
    ) -> String {
        let safeName = serviceName.map { $0 == "/" || $0 == "\0" ? "_" : $0 }
        let component = safeName.isEmpty || String(safeName) == "." || String(safeName) == ".." ? "_" : String(safeName)
        let base: String
        if let state = env["STATE_DIRECTORY"]?.split(separator: ":").first, state.hasPrefix("/") {
            base = String(state) + "/aftermath"
        } else if let xdg = env["XDG_STATE_HOME"], xdg.hasPrefix("/") {
            base = xdg + "/aftermath"
        } else if let home = env["HOME"], home.hasPrefix("/"), isWritableDirectory(home) {
            base = (home as NSString).appendingPathComponent(".local/state/aftermath")
        } else {
            base = (isWritableDirectory("/var/tmp") ? "/var/tmp" : "/tmp") + "/aftermath-\(geteuid())"
        }
        return (base as NSString).appendingPathComponent(component)
    }

    /// An existing directory (symlinks followed) this process may create entries in.
    static func isWritableDirectory(_ path: String) -> Bool {
        var st = stat()
        return stat(path, &st) == 0 && st.st_mode & S_IFMT == S_IFDIR && access(path, W_OK | X_OK) == 0
    }

    /// sub inside the root. Plain string joins, not NSString: `start` builds these paths, and
    /// Foundation's path set-up would cost it tens of microseconds.
    package func path(_ sub: String) -> String { Self.join(root, sub) }

    /// name inside dir, as NSString's appendingPathComponent joins a name without slashes
    /// (plain string joins: the collection joins one for every file it lists).
    package static func join(_ dir: String, _ name: String) -> String {
        dir.isEmpty ? name : dir.hasSuffix("/") ? dir + name : dir + "/" + name
    }

    /// The directory that holds path ("/" for a top-level one, "" for a bare name), as
    /// NSString's deletingLastPathComponent gives it.
    package static func parent(of path: String) -> String {
        // On the string's own UTF-8 bytes: a Substring's count walks its characters, at every
        // step of start's checks, and an array of them would be start's first [UInt8], whose
        // type the runtime builds by name.
        var path = path
        return path.withUTF8 { bytes in
            let slash = UInt8(ascii: "/")
            var end = bytes.count
            while end > 1, bytes[end - 1] == slash { end -= 1 }
            guard let last = bytes[..<end].lastIndex(of: slash) else { return "" }
            if last == 0 { return "/" }
            var parentEnd = last
            while parentEnd > 1, bytes[parentEnd - 1] == slash { parentEnd -= 1 }
            return String(decoding: UnsafeBufferPointer(rebasing: bytes[..<parentEnd]), as: UTF8.self)
        }
    }

    /// Creates the directories that do not exist yet (0700, missing parents too), and checks
    /// every one: a real directory (not a symlink), owned by this process's user, and not
    /// writable by group or others. A directory of ours with a wider mode is repaired to 0700;
    /// one owned by another user is refused, as is a root whose parent another user could
    /// swap it in (writable by others, not sticky, or owned by another user than us or root).
    package func prepare() throws(ReportDirectoryError) {
        try Self.createParents(of: root)
        let euid = geteuid()  // a system call each time: once, not once a directory
        try Self.checkParent(of: root, euid: euid)
        for dir in [root, crashes, hangs, runs, errors, rejected] {
            var st = stat()
            if lstat(dir, &st) != 0 {
                guard mkdir(dir, 0o700) == 0 || errno == EEXIST else {
                    throw .cannotCreate(path: dir, reason: String(cString: strerror(errno)))
                }
                guard lstat(dir, &st) == 0 else {
                    throw .cannotCreate(path: dir, reason: String(cString: strerror(errno)))
                }
            }
            try Self.checkOwnDirectory(dir, st, euid: euid)
        }
    }

    /// Creates attachments/ when missing (0700; mkdir never follows a link) and checks it as
    /// ``prepare()`` checks the others: made only when a crash has an attachment, so `start`
    /// does not pay for it.
    package func prepareAttachments() throws(ReportDirectoryError) {
        var st = stat()
        if lstat(attachments, &st) != 0 {
            guard mkdir(attachments, 0o700) == 0 || errno == EEXIST, lstat(attachments, &st) == 0 else {
                throw .cannotCreate(path: attachments, reason: String(cString: strerror(errno)))
            }
        }
        try Self.checkOwnDirectory(attachments, st)
    }

    /// Checks dir, whose lstat is st: a directory, ours, 0700 (repaired when wider or narrower).
    static func checkOwnDirectory(_ dir: String, _ st: stat, euid: uid_t = geteuid()) throws(ReportDirectoryError) {
        guard st.st_mode & S_IFMT == S_IFDIR else {
            throw .cannotCreate(path: dir, reason: "not a directory (\(StoreFiles.describe(st.st_mode & S_IFMT)))")
        }
        guard st.st_uid == euid else {
            throw .cannotCreate(
                path: dir, reason: "owned by uid \(st.st_uid), not by uid \(euid) (this process); refused")
        }
        if st.st_mode & 0o7777 != 0o700 {
            // Our own directory with the wrong mode (umask, a hand-made 0777): repaired.
            guard chmod(dir, 0o700) == 0 else {
                throw .cannotCreate(
                    path: dir,
                    reason:
                        "mode \(String(st.st_mode & 0o7777, radix: 8)) and cannot be made 0700: \(String(cString: strerror(errno)))"
                )
            }
        }
        guard access(dir, W_OK | X_OK) == 0 else {
            throw .cannotCreate(path: dir, reason: String(cString: strerror(errno)))
        }
    }

    /// Creates the missing parents of path, 0700 each (the XDG base directories' mode).
    static func createParents(of path: String) throws(ReportDirectoryError) {
        var missing: [String] = []
        var p = parent(of: path)
        var st = stat()
        while !p.isEmpty, p != "/", lstat(p, &st) != 0 {
            missing.append(p)
            p = parent(of: p)
        }
        for dir in missing.reversed() {
            guard mkdir(dir, 0o700) == 0 || errno == EEXIST else {
                throw .cannotCreate(path: dir, reason: String(cString: strerror(errno)))
            }
            _ = chmod(dir, 0o700)  // whatever the umask
        }
    }

    /// The root's parent must not let another user replace the root.
    static func checkParent(of path: String, euid: uid_t = geteuid()) throws(ReportDirectoryError) {
        let parent = parent(of: path)
        var st = stat()
        guard stat(parent, &st) == 0 else { return }  // mkdir of the root will say why
        let foreign = st.st_uid != euid && st.st_uid != 0
        let shared = st.st_mode & 0o022 != 0 && st.st_mode & S_ISVTX == 0
        if foreign || shared {
            throw .cannotCreate(
                path: path,
                reason: "its parent \(parent) is "
                    + (foreign ? "owned by uid \(st.st_uid)" : "writable by others without the sticky bit")
                    + ": another user could replace the reports directory; refused")
        }
    }
}
