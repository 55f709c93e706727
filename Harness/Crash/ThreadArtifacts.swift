import AftermathNextLaunch
import HarnessSupport
import TestSupport
import Foundation

/// What the crash left for the other views of every thread, taken before the next launch
/// delivers (and removes) the crash file: its minidump, written from the file alone, and
/// `aftermath show`'s text of it.
struct ThreadArtifacts: Sendable {
    /// The minidump's path; nil when there was no committed crash file.
    var minidump: String?
    /// The crash as decoded: thread ids and names, the crashed thread.
    var threads: [(id: UInt64, name: String, crashed: Bool)] = []
    /// `aftermath show ID --dir DIR`, nil when the command is not built.
    var show: String?
    var problems: [String] = []

    /// The `aftermath` command next to the harness (scripts/harness.sh builds it).
    static var command: String? {
        let path = ((ChildProcess.ownExecutable as NSString).deletingLastPathComponent as NSString)
            .appendingPathComponent("aftermath")
        return FileManager.default.isExecutableFile(atPath: path) ? path : nil
    }

    static func collect(reports: String, root: String) -> ThreadArtifacts {
        var artifacts = ThreadArtifacts()
        let crashes = ReportDirectory(root: reports).crashes
        guard let name = ScenarioRunner.committedCrashFiles(crashes).first else { return artifacts }
        let path = (crashes as NSString).appendingPathComponent(name)
        do {
            let report = try ReportFile.decode(Array(try Data(contentsOf: URL(fileURLWithPath: path)))).crashReport()
            artifacts.threads = report.threads.map { ($0.id, $0.name, $0.crashed) }
            let dump = (root as NSString).appendingPathComponent("crash.dmp")
            try Data(MinidumpWriter.write(report)).write(to: URL(fileURLWithPath: dump))
            artifacts.minidump = dump
        } catch {
            artifacts.problems.append("the crash file does not decode: \(error)")
        }
        if let command {
            let id =
                (try? ReportFile.decode(Array(try Data(contentsOf: URL(fileURLWithPath: path)))))
                .flatMap { try? $0.crashReport().context.reportID.fileStem } ?? name
            let run = ChildProcess.run(command, ["show", id, "--dir", reports], environment: [:], timeout: 120)
            artifacts.show = run.standardOutput
            if run.termination != .exited(0) {
                artifacts.problems.append("aftermath show ended with \(run.termination)")
            }
        }
        return artifacts
    }
}

extension Checks {
    /// `aftermath show` lists every thread of the crash, each expected worker with its function.
    func show() -> CheckResult {
        let artifacts = evidence.artifacts
        guard record != nil, !artifacts.threads.isEmpty else { return .skip(.show) }
        guard let text = artifacts.show else {
            return .fail(
                .show, "no command", "aftermath is not built next to the harness (scripts/harness.sh builds it)")
        }
        var problems = artifacts.problems
        for thread in artifacts.threads where !text.contains("\(thread.id)") {
            problems.append("thread \(thread.id) (\(thread.name)) not shown")
        }
        for worker in ThreadExpectation.of(scenario.setup).workers {
            if !text.contains(worker.name) { problems.append("\(worker.name) not shown") }
            if let function = worker.function, !text.contains(function) {
                problems.append("\(worker.name): \(function) not shown")
            }
        }
        if problems.isEmpty { return .pass(.show, "\(artifacts.threads.count)") }
        return .fail(.show, "FAIL", problems.joined(separator: "; "))
    }

    /// The minidump made from the crash file, read back by rust-minidump's minidump-stackwalk
    /// and by LLDB: every thread, the crashing one marked with the crash's reason, and each
    /// expected worker's function in its stack.
    func minidump() -> CheckResult {
        let artifacts = evidence.artifacts
        guard record != nil, let dump = artifacts.minidump else { return .skip(.minidump) }
        let readers: MinidumpReaders.Paths
        do {
            guard let paths = try MinidumpReaders.require() else { return .skip(.minidump, "off") }
            readers = paths
        } catch {
            return .fail(.minidump, "no readers", "\(error)")
        }
        var problems: [String] = []
        let crashed = artifacts.threads.first { $0.crashed }
        let workers = ThreadExpectation.of(scenario.setup).workers
        var walked = 0
        do {
            let json = try MinidumpReaders.stackwalk(readers, dump: dump)
            let threads = json["threads"] as? [[String: Any]] ?? []
            walked = threads.count
            if threads.count != max(1, artifacts.threads.count) {
                problems.append(
                    "minidump-stackwalk: \(threads.count) threads, the crash file has \(artifacts.threads.count)")
            }
            let crashInfo = json["crash_info"] as? [String: Any]
            let expectedType = scenario.exceptionType.replacingOccurrences(of: " (", with: " / ")
                .replacingOccurrences(of: ")", with: "")
            if crashInfo?["type"] as? String != expectedType {
                problems.append(
                    "minidump-stackwalk: crash type \(crashInfo?["type"] ?? "none"), expected \(expectedType)")
            }
            problems += Self.machineProblems(json["system_info"] as? [String: Any])
            let crashing = (json["crashing_thread"] as? [String: Any])?["thread_id"] as? Int
            if let crashed, crashing.map(UInt64.init) != crashed.id {
                problems.append("minidump-stackwalk: crashing thread \(crashing.map(String.init) ?? "none")")
            }
            for worker in workers {
                guard let thread = threads.first(where: { $0["thread_name"] as? String == worker.name }) else {
                    problems.append("minidump-stackwalk: no thread named \(worker.name)")
                    continue
                }
                let functions = (thread["frames"] as? [[String: Any]] ?? []).compactMap { $0["function"] as? String }
                if let function = worker.function, !functions.contains(where: { $0.hasPrefix(function) }) {
                    problems.append("minidump-stackwalk: \(worker.name) lacks \(function) (\(functions.prefix(5)))")
                }
            }
        } catch {
            problems.append("\(error)")
        }
        do {
            let text = try MinidumpReaders.lldb(readers, dump: dump, commands: ["thread list", "bt all"])
            let tids = Set(
                text.components(separatedBy: "tid = ").dropFirst().compactMap { UInt64($0.prefix { $0.isNumber }) })
            if tids.count != max(1, artifacts.threads.count) {
                problems.append("lldb: \(tids.count) threads, the crash file has \(artifacts.threads.count)")
            }
            if !text.contains("stop reason = signal \(SignalDescription.name(scenario.signal))") {
                problems.append("lldb: no stop reason signal \(SignalDescription.name(scenario.signal))")
            }
            for worker in workers {
                if let function = worker.function, !text.contains(function) {
                    problems.append("lldb: \(function) not in bt all")
                }
            }
        } catch {
            problems.append("\(error)")
        }
        let cell = "\(walked) sw+lldb"
        if problems.isEmpty { return .pass(.minidump, cell) }
        return .fail(.minidump, "FAIL", problems.joined(separator: "; "))
    }

    /// The minidump's machine against this one's (the children ran here): the processors a
    /// process may run on and, on x86-64, the family, model and stepping /proc/cpuinfo gives.
    static func machineProblems(_ info: [String: Any]?) -> [String] {
        var problems: [String] = []
        let available = ProcessInfo.processInfo.activeProcessorCount  // its affinity mask
        if info?["cpu_count"] as? Int != available {
            problems.append(
                "minidump-stackwalk: cpu_count \(info?["cpu_count"] ?? "none"), this machine has \(available)")
        }
        #if arch(x86_64)
        let cpuinfo = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
        func field(_ name: String) -> String? {
            cpuinfo.split(separator: "\n").lazy.map { $0.split(separator: ":", maxSplits: 1) }
                .first { $0.count == 2 && $0[0].trimmingCharacters(in: .whitespaces) == name }
                .map { $0[1].trimmingCharacters(in: .whitespaces) }
        }
        if let family = field("cpu family"), let model = field("model"), let stepping = field("stepping") {
            let expected = "family \(family) model \(model) stepping \(stepping)"
            if info?["cpu_info"] as? String != expected {
                problems.append("minidump-stackwalk: cpu_info \(info?["cpu_info"] ?? "none"), expected \(expected)")
            }
        }
        #endif
        return problems
    }
}
