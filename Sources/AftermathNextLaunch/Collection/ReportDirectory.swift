import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The on-disk layout of one app's reports: crashes/, hangs/, runs/, errors/ and rejected/.
package struct ReportDirectory: Sendable, Hashable {
    /// The root directory.
    package let root: String

    /// Uses root as the reports directory.
    package init(root: String) { self.root = root }

    /// The default for a service: `$XDG_STATE_HOME/aftermath/<serviceName>`, else
    /// `~/.local/state/aftermath/<serviceName>`.
    package static func defaultRoot(serviceName: String) -> String {
        let env = ProcessInfo.processInfo.environment
        let base: String
        if let xdg = env["XDG_STATE_HOME"], xdg.hasPrefix("/") {
            base = xdg
        } else {
            let home = env["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
            base = (home as NSString).appendingPathComponent(".local/state")
        }
        let safeName = serviceName.map { $0 == "/" || $0 == "\0" ? "_" : $0 }
        let component = safeName.isEmpty || String(safeName) == "." || String(safeName) == ".." ? "_" : String(safeName)
        return (base as NSString).appendingPathComponent("aftermath/\(component)")
    }

    /// Crash files written by the signal handler.
    package var crashes: String { path("crashes") }
    /// Hang files written by the watchdog.
    package var hangs: String { path("hangs") }
    /// One file per run.
    package var runs: String { path("runs") }
    /// Handled errors waiting to be exported.
    package var errors: String { path("errors") }
    /// Files that could not be used, each with a `.reason` beside it.
    package var rejected: String { path("rejected") }

    package func path(_ sub: String) -> String { (root as NSString).appendingPathComponent(sub) }

    /// Creates the directories (mode 0700) that do not exist yet.
    package func prepare() throws(ReportDirectoryError) {
        for dir in [root, crashes, hangs, runs, errors, rejected] {
            var st = stat()
            if lstat(dir, &st) != 0 {
                // mkdir(2) directly: this runs in start(), on the app's launch path.
                if mkdir(dir, 0o700) != 0 && errno != EEXIST {
                    do {
                        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true,
                                                                attributes: [.posixPermissions: 0o700])
                    } catch {
                        throw .cannotCreate(path: dir, reason: String(describing: error))
                    }
                }
            }
            guard lstat(dir, &st) == 0, st.st_mode & S_IFMT == S_IFDIR else {
                throw .cannotCreate(path: dir, reason: "not a directory")
            }
            guard access(dir, W_OK | X_OK) == 0 else {
                throw .cannotCreate(path: dir, reason: String(cString: strerror(errno)))
            }
        }
    }
}
