import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Spawns this executable as a child with a pipe on fd 3, stdout and stderr discarded.
struct BenchChild {
    var pid: pid_t
    var readFD: Int32

    static func spawn(_ arguments: [String], environment: [String: String] = [:]) -> BenchChild? {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { return nil }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, fds[1], 3)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        var env = ProcessInfo.processInfo.environment
        for (k, v) in environment { env[k] = v }
        let argv = ([exe] + arguments).map { strdup($0) } + [nil]
        let envp = env.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { argv.forEach { free($0) }; envp.forEach { free($0) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, exe, &actions, nil, argv, envp)
        close(fds[1])
        guard rc == 0 else { close(fds[0]); return nil }
        return BenchChild(pid: pid, readFD: fds[0])
    }

    /// Reads UInt64 values the child wrote on fd 3 until it closes.
    func readValues() -> [UInt64] {
        var out: [UInt64] = []
        var buffer = [UInt8]()
        var chunk = [UInt8](repeating: 0, count: 256)
        while true {
            let n = read(readFD, &chunk, chunk.count)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            buffer += chunk[0..<n]
        }
        close(readFD)
        var i = 0
        while i + 8 <= buffer.count {
            out.append(buffer[i..<i + 8].enumerated().reduce(UInt64(0)) { $0 | UInt64($1.element) << (8 * UInt64($1.offset)) })
            i += 8
        }
        return out
    }

    /// Waits for the child; returns the raw wait status.
    func wait() -> Int32 {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        return status
    }
}

enum Stats {
    static func median(_ values: [Double]) -> Double {
        guard !values.isEmpty else { return .nan }
        let s = values.sorted()
        return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
    }

    static func monotonicNanoseconds() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    static func format(_ v: Double, _ unit: String, digits: Int = 1) -> String {
        String(format: "%.\(digits)f %@", v, unit)
    }
}
