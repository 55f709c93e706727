import AftermathOTLP
import Foundation
import HarnessSupport
import Testing

/// The harnesses' child launcher: what it reports is what the child did.
@Suite("Harness child launcher")
struct ChildProcessTests {
    static let environment = ["PATH": "/usr/bin:/bin"]

    @Test("Run to completion: exit status, stdout lines, stderr, values on fd 3")
    func runToCompletion() {
        let script = "echo one; echo two >&2; printf 'three'; printf '\\001\\0\\0\\0\\0\\0\\0\\0' >&3; exit 7"
        let result = ChildProcess.run(
            "/bin/sh", ["-c", script], environment: Self.environment, timeout: 10,
            valuesDescriptor: 3)
        #expect(result.termination == .exited(7))
        #expect(result.lines == ["one", "three"])
        #expect(result.standardError == "two\n")
        #expect(result.values == [1])
        #expect(result.exitedAt != nil)
    }

    @Test("A child past its timeout is killed with its whole process group")
    func timeout() {
        let started = Date()
        // The shell's own child (sleep) holds stdout open: only killing the group ends it.
        let result = ChildProcess.run(
            "/bin/sh", ["-c", "sleep 30; echo late"], environment: Self.environment, timeout: 0.5)
        #expect(result.termination == .timedOut)
        #expect(Date().timeIntervalSince(started) < 5)
        #expect(result.lines.isEmpty)
    }

    @Test("Dropped while its child runs: the child's group is killed, and this process lives on")
    func droppedUnfinished() throws {
        // The waiter thread writes the child's status into a pipe whose read end the drop has
        // closed: EPIPE, never a SIGPIPE that would end the test process with no result.
        for _ in 0..<5 {
            _ = try ChildProcess("/bin/sh", ["-c", "exec sleep 30"], environment: Self.environment)
        }
        usleep(500_000)  // the waiters wake from waitpid and write
        let result = ChildProcess.run("/bin/sh", ["-c", "exit 4"], environment: Self.environment, timeout: 10)
        #expect(result.termination == .exited(4))
    }

    @Test("Interactive: a line as it arrives, a signal, stdin closed, RECORD lines decoded")
    func interactive() throws {
        let record = RecordLine.line(
            LogBatch(
                resource: Resource(), scopeName: "s", scopeVersion: "1",
                records: [
                    LogRecord(timeUnixNano: 5, eventName: "app.crash", attributes: [Attribute("n", .int(42))])
                ]))
        let script = "echo READY; echo '\(record)'; read line; echo GOT \"$line\"; exec sleep 30"
        let child = try ChildProcess("/bin/sh", ["-c", script], environment: Self.environment, inputPipe: true)
        #expect(child.waitForLine("READY", timeout: 10) == "READY")
        #expect(child.waitForLine("NEVER", timeout: 0.2) == nil)
        child.closeInput()
        #expect(child.waitForLine("GOT", timeout: 10) == "GOT ")
        child.signal(SIGTERM)
        let result = child.finish(timeout: 10)
        #expect(result.termination == .signaled(SIGTERM))
        let records = result.records
        #expect(records.count == 1)
        #expect(records.first?.eventName == "app.crash")
        #expect(records.first?[text: "n"] == "42")
    }
}
