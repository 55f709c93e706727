import AftermathNextLaunch
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// How a child process ended, from waitpid's status.
package enum Termination: Equatable, Sendable, CustomStringConvertible {
    case exited(Int32)
    case signaled(Int32)
    case timedOut
    case failedToStart(String)

    package init(waitStatus status: Int32) {
        let low = status & 0x7F
        if low == 0 {
            self = .exited((status >> 8) & 0xFF)          // WIFEXITED / WEXITSTATUS
        } else {
            self = .signaled(low)                          // WIFSIGNALED / WTERMSIG
        }
    }

    package var signal: Int32? {
        if case .signaled(let signal) = self { signal } else { nil }
    }

    package var description: String {
        switch self {
        case .exited(let code): "exit \(code)"
        case .signaled(let signal): SignalDescription.name(signal)
        case .timedOut: "timed out"
        case .failedToStart(let why): "not started (\(why))"
        }
    }
}

/// What a finished child left: its termination and output.
package struct ChildResult: Sendable {
    package var arguments: [String]
    package var termination: Termination
    package var standardOutput: String
    package var standardError: String
    package var milliseconds: Int
    /// When a ``StderrWatch`` was given: what its check returned the moment one of its markers
    /// first appeared on stderr; nil when no marker appeared.
    package var watchResult: Bool?
}

/// Looks at the world the moment a marker appears on a child's stderr.
package struct StderrWatch {
    package var markers: [String]
    package var check: () -> Bool

    package init(markers: [String], check: @escaping () -> Bool) {
        self.markers = markers
        self.check = check
    }
}

/// Runs the harness's own executable as a child with posix_spawn, in its own process group,
/// stdin from /dev/null, stdout and stderr captured through pipes.
package enum ChildProcess {
    /// How long to keep reading after the child exited: a helper it started (the Swift
    /// runtime's swift-backtrace) may still hold stderr open.
    package static let drainSeconds = 5.0

    package static func run(_ executable: String, _ arguments: [String], environment: [String: String],
                    timeout: Double, watch: StderrWatch? = nil) -> ChildResult {
        let started = monotonicSeconds()
        var result = ChildResult(arguments: arguments, termination: .failedToStart(""),
                                 standardOutput: "", standardError: "", milliseconds: 0, watchResult: nil)
        var outPipe: [Int32] = [-1, -1]
        var errPipe: [Int32] = [-1, -1]
        guard pipe(&outPipe) == 0, pipe(&errPipe) == 0 else {
            result.termination = .failedToStart("pipe: \(String(cString: strerror(errno)))")
            return result
        }
        // The child gets the write ends as 1 and 2 (dup2 clears the flag); nothing else leaks.
        for fd in outPipe + errPipe { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        let spawned = spawn(executable, arguments, environment, stdout: outPipe[1], stderr: errPipe[1])
        close(outPipe[1])
        close(errPipe[1])
        guard case .success(let pid) = spawned else {
            close(outPipe[0])
            close(errPipe[0])
            if case .failure(let error) = spawned { result.termination = .failedToStart(error.message) }
            return result
        }

        var out: [UInt8] = [], err: [UInt8] = []
        var fds = [pollfd(fd: outPipe[0], events: Int16(POLLIN), revents: 0),
                   pollfd(fd: errPipe[0], events: Int16(POLLIN), revents: 0)]
        var status: Int32 = 0
        var exitedAt: Double?
        var timedOut = false
        var pendingWatch = watch
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            if exitedAt == nil, waitpid(pid, &status, WNOHANG) == pid { exitedAt = monotonicSeconds() }
            let open = fds.contains { $0.fd >= 0 }
            if let exitedAt, !open || monotonicSeconds() - exitedAt > drainSeconds { break }
            if exitedAt == nil, monotonicSeconds() - started > timeout {
                kill(-pid, SIGKILL)  // the whole group: the child and any helper it started
                waitpid(pid, &status, 0)
                timedOut = true
                break
            }
            _ = poll(&fds, nfds_t(fds.count), open ? 20 : 5)
            for i in fds.indices where fds[i].fd >= 0 && fds[i].revents != 0 {
                let n = chunk.withUnsafeMutableBytes { read(fds[i].fd, $0.baseAddress, $0.count) }
                if n < 0 && errno == EINTR { continue }
                if n <= 0 {
                    close(fds[i].fd)
                    fds[i].fd = -1
                    continue
                }
                if i == 0 {
                    out += chunk[..<n]
                } else {
                    let before = err.count
                    err += chunk[..<n]
                    if let watch = pendingWatch, sawMarker(watch.markers, in: err, newFrom: before) {
                        result.watchResult = watch.check()
                        pendingWatch = nil
                    }
                }
            }
        }
        for fd in fds where fd.fd >= 0 { close(fd.fd) }
        result.termination = timedOut ? .timedOut : Termination(waitStatus: status)
        result.standardOutput = String(decoding: out, as: UTF8.self)
        result.standardError = String(decoding: err, as: UTF8.self)
        result.milliseconds = Int((monotonicSeconds() - started) * 1000)
        return result
    }

    package struct SpawnError: Error { var message: String }

    private static func spawn(_ executable: String, _ arguments: [String], _ environment: [String: String],
                              stdout: Int32, stderr: Int32) -> Result<pid_t, SpawnError> {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, stdout, 1)
        posix_spawn_file_actions_adddup2(&actions, stderr, 2)

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // Own process group (so a timeout kills helpers too); default dispositions and an empty
        // mask, whatever the harness itself inherited, so the child starts like a fresh app.
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGSEGV, SIGBUS, SIGILL, SIGTRAP, SIGFPE, SIGABRT, SIGSYS, SIGPIPE, SIGQUIT] {
            sigaddset(&defaults, signal)
        }
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setsigmask(&attributes, &empty)
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))

        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = environment.sorted { $0.key < $1.key }.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { (argv + envp).forEach { free($0) } }
        var pid = pid_t()
        let status = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
        guard status == 0 else { return .failure(SpawnError(message: "posix_spawn: \(String(cString: strerror(status)))")) }
        return .success(pid)
    }

    /// Whether a marker appears in bytes, looking only where bytes added from newFrom on
    /// could complete it.
    private static func sawMarker(_ markers: [String], in bytes: [UInt8], newFrom: Int) -> Bool {
        markers.contains { marker in
            let needle = Array(marker.utf8)
            let from = max(0, newFrom - needle.count + 1)
            guard bytes.count - from >= needle.count else { return false }
            return (from...(bytes.count - needle.count)).contains { start in
                bytes[start..<(start + needle.count)].elementsEqual(needle)
            }
        }
    }

    package static func monotonicSeconds() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }
}
