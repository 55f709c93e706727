import Foundation
import Synchronization

/// One child launch of this executable, its stdout collected line by line.
final class ChildProcess: Sendable {
    let process: Process
    private let input = Pipe()
    private let output = Pipe()
    private let buffer = LineBuffer()

    /// stdout, split into lines as it arrives.
    final class LineBuffer: Sendable {
        let lines = Mutex<[String]>([])
        let partial = Mutex<[UInt8]>([])
    }

    /// Starts `exit-harness child <args>`, optionally through a shell prefix (cgroup entry).
    init(_ args: [String], shellPrefix: String? = nil, environment extra: [String: String] = [:]) throws {
        let process = Process()
        let exe = CommandLine.arguments[0].hasPrefix("/") ? CommandLine.arguments[0]
            : FileManager.default.currentDirectoryPath + "/" + CommandLine.arguments[0]
        if let shellPrefix {
            process.executableURL = URL(fileURLWithPath: "/bin/sh")
            process.arguments = ["-c", shellPrefix + "; exec \"$0\" \"$@\"", exe, "child"] + args
        } else {
            process.executableURL = URL(fileURLWithPath: exe)
            process.arguments = ["child"] + args
        }
        var env = ProcessInfo.processInfo.environment
        env["SWIFT_BACKTRACE"] = "enable=no"
        for (k, v) in extra { env[k] = v }
        process.environment = env
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        self.process = process
        let buffer = self.buffer
        output.fileHandleForReading.readabilityHandler = { handle in
            let data = handle.availableData
            guard !data.isEmpty else { handle.readabilityHandler = nil; return }
            buffer.partial.withLock { buf in
                buf += data
                while let nl = buf.firstIndex(of: 10) {
                    let line = String(decoding: buf[..<nl], as: UTF8.self)
                    buffer.lines.withLock { $0.append(line) }
                    buf.removeSubrange(...nl)
                }
            }
        }
        try process.run()
    }

    var pid: Int32 { process.processIdentifier }
    var output_: [String] { buffer.lines.withLock { $0 } }

    /// Waits for a line starting with prefix; nil after the timeout.
    func waitForLine(_ prefix: String, timeout: Double = 20) -> String? {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let l = buffer.lines.withLock({ $0.first { $0.hasPrefix(prefix) } }) { return l }
            if !process.isRunning, buffer.lines.withLock({ !$0.contains { $0.hasPrefix(prefix) } }) {
                usleep(50_000) // let the last output arrive
                return buffer.lines.withLock { $0.first { $0.hasPrefix(prefix) } }
            }
            usleep(10_000)
        }
        return nil
    }

    /// Closes the child's stdin (a "wait" child then exits normally).
    func closeInput() { try? input.fileHandleForWriting.close() }

    func signal(_ signo: Int32) { kill(pid, signo) }

    /// Waits for the end; "exit N" or "signal N" ("timeout" after the limit, then killed).
    func finish(timeout: Double = 30) -> String {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        if process.isRunning { kill(pid, SIGKILL); process.waitUntilExit(); return "timeout" }
        usleep(20_000)
        return process.terminationReason == .uncaughtSignal ? "signal \(process.terminationStatus)"
            : "exit \(process.terminationStatus)"
    }

    /// The RECORD lines, decoded.
    var records: [[String: String]] {
        output_.compactMap { line in
            guard line.hasPrefix("RECORD ") else { return nil }
            return (try? JSONSerialization.jsonObject(with: Data(line.dropFirst(7).utf8))) as? [String: String]
        }
    }
}
