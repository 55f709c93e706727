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
    var records: [[String: Any]] = []
    var stats = ""
    var session = ""
    var lines: [String] = []
    var killedBySignal: Int32?
    var exitCode: Int32?
}

/// The parent: runs every scenario in real child processes and checks their records.
enum Parent {
    static let executable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    static let symbolicator = Symbolicator()

    /// Runs a child; `onLine` may act on its output as it comes (stop it, kill it).
    static func runChild(_ arguments: [String], launcher: [String] = [], timeout: Double = 20,
                         onLine: @escaping @Sendable (String, pid_t) -> Void = { _, _ in }) -> ChildOutcome {
        let process = Process()
        let all = launcher + [executable] + arguments
        process.executableURL = URL(fileURLWithPath: all[0])
        process.arguments = Array(all.dropFirst())
        var environment = ProcessInfo.processInfo.environment
        environment["SWIFT_BACKTRACE"] = "enable=no"
        process.environment = environment
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        var outcome = ChildOutcome()
        do { try process.run() } catch {
            outcome.lines.append("ERROR cannot start: \(error)")
            return outcome
        }
        let pid = process.processIdentifier
        DispatchQueue.global().asyncAfter(deadline: .now() + timeout) { [process] in
            if process.isRunning { kill(pid, SIGKILL) }
        }
        var pending = Data()
        let handle = pipe.fileHandleForReading
        while true {
            let chunk = handle.availableData
            if chunk.isEmpty { break }
            pending.append(chunk)
            while let newline = pending.firstIndex(of: 10) {
                let line = String(decoding: pending[pending.startIndex..<newline], as: UTF8.self)
                pending.removeSubrange(pending.startIndex...newline)
                outcome.lines.append(line)
                onLine(line, pid)
            }
        }
        process.waitUntilExit()
        if process.terminationReason == .uncaughtSignal {
            outcome.killedBySignal = process.terminationStatus
        } else {
            outcome.exitCode = process.terminationStatus
        }
        for line in outcome.lines {
            if line.hasPrefix("RECORD "),
               let object = try? JSONSerialization.jsonObject(with: Data(line.dropFirst(7).utf8)) as? [String: Any] {
                outcome.records.append(object)
            } else if line.hasPrefix("STATS ") {
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
                  let offset = UInt64(parts[4].dropFirst(2), radix: 16), address >= offset else { return nil }
            return symbolicator.symbolicate(address: address, imagePath: executable, loadAddress: address - offset,
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
        ((try? FileManager.default.contentsOfDirectory(atPath: directory + "/hangs")) ?? []).filter { !$0.hasPrefix(".") }
    }
}
