import AftermathNextLaunch
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A child process started with posix_spawn, in its own process group, with default signal
/// dispositions and an empty mask (it starts like a fresh app, whatever the harness inherited).
///
/// Two ways to use it. Run to completion: ``run(_:_:environment:timeout:captureOutput:valuesDescriptor:watch:)``
/// waits for the end, killing the whole group after the timeout. Interactive: `init` starts it;
/// ``waitForLine(_:timeout:)`` reads stdout lines as they arrive, ``signal(_:)`` and
/// ``closeInput()`` act on it, ``finish(timeout:)`` waits for the end. The child's output is
/// read only while one of these runs, on the caller's thread.
package final class ChildProcess {
    /// How long to keep reading after the child exited: a helper it started (the Swift
    /// runtime's swift-backtrace) may still hold stderr open.
    package static let drainSeconds = 5.0

    package struct SpawnError: Error, CustomStringConvertible {
        package var description: String
    }

    /// This executable, resolved: harnesses and the benchmark run themselves as children.
    package static let ownExecutable: String =
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]

    package let pid: pid_t
    package let arguments: [String]
    /// The complete stdout lines so far.
    package private(set) var lines: [String] = []

    private var stdoutFD: Int32 = -1, stderrFD: Int32 = -1, valuesFD: Int32 = -1, exitFD: Int32 = -1,
        inputFD: Int32 = -1
    private var out: [UInt8] = [], err: [UInt8] = [], valueBytes: [UInt8] = [], exitBytes: [UInt8] = []
    private var lineStart = 0
    private var watch: StderrWatch?
    private var watchResult: Bool?
    private var onLine: ((String, pid_t) -> Void)?
    private var status: Int32?
    private var exitedAt: UInt64?
    private var timedOut = false
    private var finished: ChildResult?
    private let started = Monotonic.seconds()

    /// Starts `executable arguments`. stdin is /dev/null, or a pipe closed by ``closeInput()``;
    /// stdout and stderr are captured, or go to /dev/null; with `valuesDescriptor` the child
    /// also gets a pipe on that descriptor (read into ``ChildResult/values``). `onLine` sees
    /// every stdout line as it is read, with the child's pid.
    package init(
        _ executable: String, _ arguments: [String], environment: [String: String],
        inputPipe: Bool = false, captureOutput: Bool = true, valuesDescriptor: Int32? = nil,
        watch: StderrWatch? = nil, onLine: ((String, pid_t) -> Void)? = nil
    ) throws(SpawnError) {
        self.arguments = arguments
        self.watch = watch
        self.onLine = onLine
        var pipes: [(read: Int32, write: Int32)] = []
        func makePipe() throws(SpawnError) -> (read: Int32, write: Int32) {
            var fds: [Int32] = [-1, -1]
            guard pipe(&fds) == 0 else {
                for p in pipes {
                    close(p.read)
                    close(p.write)
                }
                throw SpawnError(description: "pipe: \(String(cString: strerror(errno)))")
            }
            // The child gets its ends through dup2 (which clears the flag); nothing else leaks.
            for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
            pipes.append((fds[0], fds[1]))
            return (fds[0], fds[1])
        }
        let input = inputPipe ? try makePipe() : nil
        let output = captureOutput ? try makePipe() : nil
        let errors = captureOutput ? try makePipe() : nil
        let values = valuesDescriptor != nil ? try makePipe() : nil

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if let input {
            posix_spawn_file_actions_adddup2(&actions, input.read, 0)
        } else {
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        }
        if let output, let errors {
            posix_spawn_file_actions_adddup2(&actions, output.write, 1)
            posix_spawn_file_actions_adddup2(&actions, errors.write, 2)
        } else {
            posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
            posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        }
        if let values, let valuesDescriptor {
            posix_spawn_file_actions_adddup2(&actions, values.write, valuesDescriptor)
        }

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // Own process group (so a timeout kills helpers too); default dispositions and an empty
        // mask, so the child starts like a fresh app.
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGSEGV, SIGBUS, SIGILL, SIGTRAP, SIGFPE, SIGABRT, SIGSYS, SIGPIPE, SIGQUIT, SIGTERM, SIGINT] {
            sigaddset(&defaults, signal)
        }
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setsigmask(&attributes, &empty)
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(
            &attributes, Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))

        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = environment.sorted { $0.key < $1.key }.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { (argv + envp).forEach { free($0) } }
        var pid = pid_t()
        let spawned = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
        // The parent keeps the read ends (and stdin's write end) only.
        for p in pipes where p.read != input?.read { close(p.write) }
        if let input { close(input.read) }
        guard spawned == 0 else {
            for p in pipes where p.read != input?.read { close(p.read) }
            if let input { close(input.write) }
            throw SpawnError(description: "posix_spawn \(executable): \(String(cString: strerror(spawned)))")
        }
        self.pid = pid
        inputFD = input?.write ?? -1
        stdoutFD = output?.read ?? -1
        stderrFD = errors?.read ?? -1
        valuesFD = values?.read ?? -1
        exitFD = Self.startWaiter(pid)
    }

    deinit {
        if exitFD >= 0 { kill(-pid, SIGKILL) }  // dropped unfinished: the waiter then returns
        for fd in [stdoutFD, stderrFD, valuesFD, exitFD, inputFD] where fd >= 0 { close(fd) }
    }

    /// Runs a child to the end: its termination and everything it wrote. After `timeout`
    /// seconds its whole process group is killed.
    package static func run(
        _ executable: String, _ arguments: [String], environment: [String: String],
        timeout: Double, captureOutput: Bool = true, valuesDescriptor: Int32? = nil,
        watch: StderrWatch? = nil
    ) -> ChildResult {
        do {
            let child = try ChildProcess(
                executable, arguments, environment: environment, captureOutput: captureOutput,
                valuesDescriptor: valuesDescriptor, watch: watch)
            return child.finish(timeout: timeout)
        } catch {
            return ChildResult(
                arguments: arguments, termination: .failedToStart(error.description), standardOutput: "",
                lines: [], standardError: "", values: [], milliseconds: 0, exitedAt: nil, watchResult: nil)
        }
    }

    /// The first stdout line starting with prefix, reading until it comes, stdout closes, or
    /// `timeout` seconds pass (nil then).
    package func waitForLine(_ prefix: String, timeout: Double = 20) -> String? {
        let deadline = Monotonic.seconds() + timeout
        var match: String? { lines.first { $0.hasPrefix(prefix) } }
        while match == nil, stdoutFD >= 0, Monotonic.seconds() < deadline {
            pump(until: deadline)
        }
        return match
    }

    /// Sends a signal to the child (not its group), unless it has already been waited for.
    package func signal(_ signo: Int32) {
        if status == nil { kill(pid, signo) }
    }

    /// Closes the child's stdin (started with `inputPipe`).
    package func closeInput() {
        if inputFD >= 0 { close(inputFD) }
        inputFD = -1
    }

    /// Waits for the end, reading all output; after `timeout` seconds kills the whole group.
    /// Called again, returns the same result.
    package func finish(timeout: Double = 30) -> ChildResult {
        if let finished { return finished }
        let deadline = started + timeout
        // Until the child was waited for (the waiter closes its pipe either way), then while
        // output may still come, for at most drainSeconds.
        while exitFD >= 0
            || (Monotonic.seconds() - exitedSeconds < Self.drainSeconds
                && (stdoutFD >= 0 || stderrFD >= 0 || valuesFD >= 0))
        {
            if exitFD >= 0, Monotonic.seconds() > deadline, !timedOut {
                kill(-pid, SIGKILL)  // the whole group: the child and any helper it started
                timedOut = true
            }
            pump(until: exitFD >= 0 ? (timedOut ? .infinity : deadline) : exitedSeconds + Self.drainSeconds)
        }
        closeInput()
        for fd in [stdoutFD, stderrFD, valuesFD] where fd >= 0 { close(fd) }
        stdoutFD = -1
        stderrFD = -1
        valuesFD = -1
        if lineStart < out.count { lines.append(String(decoding: out[lineStart...], as: UTF8.self)) }
        lineStart = out.count
        var values: [UInt64] = []
        var i = 0
        while i + 8 <= valueBytes.count {
            values.append((0..<8).reduce(UInt64(0)) { $0 | UInt64(valueBytes[i + $1]) << (8 * UInt64($1)) })
            i += 8
        }
        let result = ChildResult(
            arguments: arguments,
            termination: timedOut
                ? .timedOut : status.map(Termination.init(waitStatus:)) ?? .failedToStart("waitpid failed"),
            standardOutput: String(decoding: out, as: UTF8.self), lines: lines,
            standardError: String(decoding: err, as: UTF8.self), values: values,
            milliseconds: Int((Monotonic.seconds() - started) * 1000), exitedAt: exitedAt, watchResult: watchResult)
        finished = result
        return result
    }

    /// When the child was waited for, in monotonic seconds (0 when its status was lost).
    private var exitedSeconds: Double { Double(exitedAt ?? 0) / 1e9 }

    /// Waits once for input on any open descriptor (until `deadline`, in monotonic seconds), and
    /// reads what is there.
    private func pump(until deadline: Double) {
        var fds = [stdoutFD, stderrFD, valuesFD, exitFD].filter { $0 >= 0 }.map {
            pollfd(fd: $0, events: Int16(POLLIN), revents: 0)
        }
        guard !fds.isEmpty else { return }
        let remaining = deadline - Monotonic.seconds()
        let ms = remaining.isInfinite ? -1 : Int32(max(0, min(remaining * 1000, 60_000)).rounded(.up))
        guard poll(&fds, nfds_t(fds.count), ms) > 0 else { return }
        var chunk = [UInt8](repeating: 0, count: 65536)
        for entry in fds where entry.revents != 0 {
            let n = chunk.withUnsafeMutableBytes { read(entry.fd, $0.baseAddress, $0.count) }
            if n < 0 && (errno == EINTR || errno == EAGAIN) { continue }
            let bytes = n > 0 ? chunk[..<n] : []
            switch entry.fd {
            case stdoutFD:
                out += bytes
                splitLines()
                if n <= 0 {
                    close(stdoutFD)
                    stdoutFD = -1
                }
            case stderrFD:
                let before = err.count
                err += bytes
                if let pending = watch, Self.sawMarker(pending.markers, in: err, newFrom: before) {
                    watchResult = pending.check()
                    watch = nil
                }
                if n <= 0 {
                    close(stderrFD)
                    stderrFD = -1
                }
            case valuesFD:
                valueBytes += bytes
                if n <= 0 {
                    close(valuesFD)
                    valuesFD = -1
                }
            default:
                exitBytes += bytes
                if status == nil, exitBytes.count >= 12 {
                    exitBytes.withUnsafeBytes { raw in
                        status = raw.loadUnaligned(fromByteOffset: 0, as: Int32.self)
                        exitedAt = raw.loadUnaligned(fromByteOffset: 4, as: UInt64.self)
                    }
                }
                if n <= 0 || status != nil {
                    close(exitFD)
                    exitFD = -1
                }
            }
        }
    }

    private func splitLines() {
        while let newline = out[lineStart...].firstIndex(of: 10) {
            let line = String(decoding: out[lineStart..<newline], as: UTF8.self)
            lineStart = newline + 1
            lines.append(line)
            onLine?(line, pid)
        }
    }

    /// A thread that blocks in waitpid for the child and then writes its status and the
    /// monotonic time into a pipe: the parent sees the exit the moment it happens, in poll.
    /// A ChildProcess dropped before its child ended has closed the read end by then: the
    /// thread blocks SIGPIPE, so that write fails with EPIPE instead of ending this process
    /// (the signal stays pending on the thread and goes with it).
    private static func startWaiter(_ pid: pid_t) -> Int32 {
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { return -1 }
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        let writeFD = fds[1]
        let thread = Thread {
            var brokenPipe = sigset_t()
            sigemptyset(&brokenPipe)
            sigaddset(&brokenPipe, SIGPIPE)
            pthread_sigmask(SIG_BLOCK, &brokenPipe, nil)
            var status: Int32 = 0
            var result: pid_t
            repeat { result = waitpid(pid, &status, 0) } while result < 0 && errno == EINTR
            var message = [UInt8](repeating: 0, count: 12)
            if result == pid {
                var now = Monotonic.nanoseconds()
                withUnsafeBytes(of: &status) { message.replaceSubrange(0..<4, with: $0) }
                withUnsafeBytes(of: &now) { message.replaceSubrange(4..<12, with: $0) }
                _ = message.withUnsafeBytes { write(writeFD, $0.baseAddress, $0.count) }
            }
            close(writeFD)
        }
        thread.start()
        return fds[0]
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
}
