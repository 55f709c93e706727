import Aftermath
import AftermathNextLaunch
import AftermathOTLP
import AftermathTesting
import AftermathSymbolication
import HarnessSupport
import CHarnessFaults
import Foundation

/// Runs scenarios, judges them, prints the table; returns the process's exit status.
struct Matrix {
    var scenarios: [Scenario]
    /// Keep every scenario's directories under this one instead of a temporary directory.
    var keepDirectory: String?
    /// The handler detector to preload into the crashing children (Harness/Detector), if any.
    var detector: String?
    /// Print each scenario's symbolicated stack and the children's output.
    var verbose: Bool

    func run() -> Int32 {
        let executable = ChildProcess.ownExecutable
        guard let base = prepareBaseDirectory() else { return 2 }
        var environment = ProcessInfo.processInfo.environment
        environment["SWIFT_BACKTRACE"] = "enable=yes,interactive=no"
        var runner = ScenarioRunner(executable: executable, baseDirectory: base, environment: environment)
        if let detector {
            guard FileManager.default.fileExists(atPath: detector) else {
                ChildMode.say("crash-harness: no handler detector at \(detector)\n", fd: 2)
                return 2
            }
            runner.detector =
                (detector as NSString).standardizingPath.hasPrefix("/")
                ? detector : FileManager.default.currentDirectoryPath + "/" + detector
        }
        let stack = CrashStack()
        let executableName = (executable as NSString).lastPathComponent

        var rows: [Row] = []
        for scenario in scenarios {
            fflush(nil)  // all streams: keeps this progress line after the details printed so far
            Table.progress("crash-harness", scenario.name)
            let evidence = runner.run(scenario)
            let record = evidence.crashRecords.count == 1 ? evidence.crashRecords[0] : nil
            let images =
                (record?[attribute: "apsio.crash.images"]?.stringValue).flatMap { try? ImageEntry.decodeList($0) } ?? []
            let frames = stack.symbolicate(
                record?[attribute: "exception.stacktrace"]?.stringValue ?? "", images: images)
            var judge = Checks(evidence: evidence, frames: frames, executableName: executableName)
            judge.symbolicate = { stack.symbolicate($0, images: images) }
            let checks = judge.all()
            let ms =
                evidence.withAftermath.milliseconds + evidence.withoutAftermath.milliseconds
                + evidence.nextLaunch.milliseconds
            let row = Row(scenario: scenario.name, checks: checks, milliseconds: ms)
            if verbose || !row.passed { print(Details.describe(evidence, frames: frames, full: verbose)) }
            rows.append(row)
        }

        var extra: [Bool?] = [], notes: [String] = []
        if scenarios.count == Scenario.all.count {
            let pid1 = PIDNamespaceCheck(executable: executable, baseDirectory: base, environment: environment).run()
            notes.append(pid1.line)
            extra.append(pid1.passed)
        }
        if let keepDirectory {
            notes.append("Reports kept in \(keepDirectory)")
        } else {
            try? FileManager.default.removeItem(atPath: base)
        }
        return Table.print(rows, extra: extra, between: notes)
    }

    private func prepareBaseDirectory() -> String? {
        if let keepDirectory {
            do {
                try FileManager.default.createDirectory(atPath: keepDirectory, withIntermediateDirectories: true)
                for scenario in scenarios {  // a previous run's files would confuse the checks
                    try? FileManager.default.removeItem(
                        atPath: (keepDirectory as NSString).appendingPathComponent(scenario.name))
                }
                return keepDirectory
            } catch {
                ChildMode.say("crash-harness: cannot create \(keepDirectory): \(error)\n", fd: 2)
                return nil
            }
        }
        let tmp = ProcessInfo.processInfo.environment["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
        var template = Array("\(tmp)/crash-harness.XXXXXX".utf8CString)
        guard template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) != nil else {
            ChildMode.say("crash-harness: mkdtemp in \(tmp) failed\n", fd: 2)
            return nil
        }
        return template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }
}

/// The text printed for a scenario that failed (or for every scenario with --verbose).
enum Details {
    static func describe(_ e: Evidence, frames: [StackFrame], full: Bool) -> String {
        var out = ["== \(e.scenario.name): \(e.scenario.summary)"]
        for (label, child) in [
            ("with Aftermath", e.withAftermath), ("without", e.withoutAftermath), ("next launch", e.nextLaunch),
        ] {
            out.append(
                "  \(label): \(child.termination), \(child.milliseconds) ms, stderr \(child.standardError.utf8.count) bytes"
            )
            let lines = child.standardOutput.split(separator: "\n")
            out += lines.prefix(6).map { "    out: \($0)" }
            if !full || label == "next launch" {
                out += child.standardError.split(separator: "\n").prefix(full ? 0 : 8).map { "    err: \($0)" }
            }
        }
        out.append("  reports: \(e.reportsDirectory)")
        out.append(
            "  exported: \(e.crashRecords.count) app.crash"
                + (e.otherEventNames.isEmpty ? "" : ", others: \(e.otherEventNames.joined(separator: ", "))"))
        if !frames.isEmpty {
            out.append("  stack (\(frames.count) frames, symbolicated where the image is on this machine):")
            let chain = frames.indices.filter { frames[$0].symbol?.contains("crashChainLevel") == true }
            let head = Set(frames.indices.prefix(12))
            let around = Set(chain.flatMap { max(0, $0 - 1)...min(frames.count - 1, $0 + 1) })
            let tail = Set(frames.indices.suffix(3))
            var last = -1
            for i in frames.indices where head.contains(i) || around.contains(i) || tail.contains(i) {
                if i != last + 1 { out.append("    …") }
                out.append("    " + frames[i].description)
                last = i
            }
        }
        return out.joined(separator: "\n")
    }
}
