import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Aftermath's resident unwinding helper as other processes see it: a child process of the app
/// named `aftermath.unw` (the app's thread of that name is its creator).
public enum UnwindHelperProcess {
    public static let name = "aftermath.unw"

    /// (state, ppid, comm) of a process, from /proc/<pid>/stat; nil when it is gone.
    public static func stat(_ pid: pid_t) -> (state: Character, ppid: pid_t, comm: String)? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let open = text.firstIndex(of: "("), let close = text.lastIndex(of: ")")
        else { return nil }
        let comm = String(text[text.index(after: open)..<close])
        let rest = text[text.index(after: close)...].split(separator: " ")
        guard rest.count >= 2, let state = rest[0].first, let ppid = pid_t(rest[1]) else { return nil }
        return (state, ppid, comm)
    }

    /// The helper processes whose parent is pid.
    public static func helpers(of pid: pid_t) -> [pid_t] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { pid_t($0) }.filter { candidate in
            guard let s = stat(candidate) else { return false }
            return s.ppid == pid && s.comm == name && s.state != "Z"
        }.sorted()
    }

    /// Waits up to seconds for pid's helper to appear; its pids.
    public static func waitForHelpers(of pid: pid_t, seconds: Double = 2) -> [pid_t] {
        let end = Date().addingTimeInterval(seconds)
        var found = helpers(of: pid)
        while found.isEmpty && Date() < end {
            usleep(10_000)
            found = helpers(of: pid)
        }
        return found
    }

    /// True when helper (a child of parent) has ended within seconds: gone, a zombie, or its pid
    /// now another process's.
    public static func ended(_ helper: pid_t, formerParent parent: pid_t, within seconds: Double = 1) -> Bool {
        let end = Date().addingTimeInterval(seconds)
        repeat {
            guard let s = stat(helper), s.comm == name, s.state != "Z" else { return true }
            usleep(10_000)
        } while Date() < end
        return false
    }
}
