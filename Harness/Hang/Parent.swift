import Aftermath
import AftermathNextLaunch
import AftermathOTLP
import AftermathTesting
import AftermathSymbolication
import HarnessSupport
import Dispatch
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// What one child printed and how it ended.
struct ChildOutcome {
    var records: [LogRecord] = []
    var stats = ""
    var session = ""
    var lines: [String] = []
    var killedBySignal: Int32?
    var exitCode: Int32?
}

/// The parent: runs every scenario in real child processes and checks their records.
enum Parent {
    static let executable = ChildProcess.ownExecutable
    static let symbolicator = Symbolicator()

    /// Runs a child; `onLine` may act on its output as it comes (stop it, kill it).
    static func runChild(
        _ arguments: [String], launcher: [String] = [], timeout: Double = 20,
        onLine: @escaping (String, pid_t) -> Void = { _, _ in }
    ) -> ChildOutcome {
        let all = launcher + [executable] + arguments
        var environment = ProcessInfo.processInfo.environment
        environment["SWIFT_BACKTRACE"] = "enable=no"
        var outcome = ChildOutcome()
        let result: ChildResult
        do {
            result = try ChildProcess(all[0], Array(all.dropFirst()), environment: environment, onLine: onLine)
                .finish(timeout: timeout)
        } catch {
            outcome.lines.append("ERROR cannot start: \(error)")
            return outcome
        }
        outcome.lines = result.lines
        outcome.records = result.records
        switch result.termination {
        case .signaled(let signal): outcome.killedBySignal = signal
        case .timedOut: outcome.killedBySignal = SIGKILL
        case .exited(let code): outcome.exitCode = code
        case .failedToStart: break
        }
        for line in outcome.lines {
            if line.hasPrefix("STATS ") {
                outcome.stats = String(line.dropFirst(6))
            } else if line.hasPrefix("SESSION ") {
                outcome.session = String(line.dropFirst(8))
            }
        }
        return outcome
    }

    /// The symbol names of the frames of the stacktrace that lie in this executable.
    static func symbols(_ stacktrace: String) -> [String] {
        let name = (executable as NSString).lastPathComponent
        return stacktrace.split(separator: "\n").compactMap { line -> String? in
            let parts = line.split(separator: " ")
            guard parts.count == 5, parts[1] == name, let index = Int(parts[0]),
                let address = UInt64(parts[2].dropFirst(2), radix: 16),
                let offset = UInt64(parts[4].dropFirst(2), radix: 16), address >= offset
            else { return nil }
            return symbolicator.symbolicate(
                address: address, imagePath: executable, loadAddress: address - offset,
                isReturnAddress: index > 0)?.demangled
        }
    }

    /// A fresh reports directory.
    static func makeDirectory(_ scenario: String) -> String {
        let path = NSTemporaryDirectory() + "hang-harness-\(getpid())-\(scenario)"
        try? FileManager.default.removeItem(atPath: path)
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    static func hangFiles(_ directory: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory + "/hangs")) ?? []).filter {
            !$0.hasPrefix(".")
        }
    }
}
