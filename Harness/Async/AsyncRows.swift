import AftermathNextLaunch
import AftermathOTLP
import AftermathSymbolication
import Foundation
import HarnessSupport
#if canImport(Glibc)
import Glibc
#endif

enum AsyncColumn: String, CaseIterable, Sendable, TableColumn {
    case record = "record"
    case machine = "machine L3"
    case chain = "async L2<L1<entry"
    case show = "show file:line"
    case anchor = "anchor"
}

/// One row: a child that crashes, hangs or records an error in async code, then the next launch.
struct AsyncRow: Sendable {
    var name: String
    /// The record's event name (nil: a handled error, which has none).
    var event: String?
    /// The report file's folder and suffix, for `aftermath show`.
    var folder: String
    var suffix: String
    /// The child dies of a signal (crash rows), else it ends itself.
    var crashes: Bool
    /// The signal it dies of.
    var signal: Int32 = SIGSEGV

    static let all: [AsyncRow] = [
        AsyncRow(name: "crash-await", event: "app.crash", folder: "crashes", suffix: ".crash", crashes: true),
        AsyncRow(name: "crash-entry", event: "app.crash", folder: "crashes", suffix: ".crash", crashes: true),
        AsyncRow(name: "crash-sync", event: "app.crash", folder: "crashes", suffix: ".crash", crashes: true),
        AsyncRow(
            name: "crash-trap", event: "app.crash", folder: "crashes", suffix: ".crash", crashes: true,
            signal: Fault.swiftTrapSignal),
        AsyncRow(name: "crash-hostile", event: "app.crash", folder: "crashes", suffix: ".crash", crashes: true),
        AsyncRow(name: "hang-main", event: "apsio.hang", folder: "hangs", suffix: ".hang", crashes: false),
        AsyncRow(name: "hang-pool", event: "apsio.hang", folder: "hangs", suffix: ".hang", crashes: false),
        AsyncRow(name: "error", event: nil, folder: "errors", suffix: ".error", crashes: false),
    ]

    /// The three levels and the task's entry, as the demangled names of this harness show them.
    var levels: (l3: String, l2: String, l1: String) {
        name == "hang-main"
            ? ("asyncHarnessMainLevel3", "asyncHarnessMainLevel2", "asyncHarnessMainLevel1")
            : ("asyncHarnessLevel3", "asyncHarnessLevel2", "asyncHarnessLevel1")
    }

    func run() -> TableRow<AsyncColumn> {
        let started = Date()
        let dir = NSTemporaryDirectory() + "async-harness-\(getpid())-\(name)"
        try? FileManager.default.removeItem(atPath: dir)
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var environment = ProcessInfo.processInfo.environment
        environment["SWIFT_BACKTRACE"] = "enable=no"
        let me = ChildProcess.ownExecutable
        let first = ChildProcess.run(me, ["child", name, "crash", dir], environment: environment, timeout: 30)
        var checks: [TableCheck<AsyncColumn>] = []
        let ms = { Int(Date().timeIntervalSince(started) * 1000) }
        let expected: Termination = crashes ? .signaled(signal) : .exited(0)
        guard first.termination == expected else {
            checks.append(
                .fail(
                    .record, "child",
                    "the child ended with \(first.termination), expected \(expected): "
                        + first.lines.suffix(3).joined(separator: " / ")))
            return TableRow(scenario: name, checks: checks, milliseconds: ms())
        }
        let view = showJSON(dir)
        let second = ChildProcess.run(me, ["child", name, "collect", dir], environment: environment, timeout: 60)
        let records = second.records.filter { event == nil ? $0.eventName == nil : $0.eventName == event }
        guard let record = records.first else {
            checks.append(.fail(.record, "none", "no \(event ?? "handled error") record among \(second.records.count)"))
            return TableRow(scenario: name, checks: checks, milliseconds: ms())
        }
        checks.append(.pass(.record, event ?? "error"))
        checks += AsyncChecks(row: self, record: record, view: view).all()
        return TableRow(scenario: name, checks: checks, milliseconds: ms())
    }

    /// `aftermath show <id> --dir <dir> --json` of the row's one report, parsed; nil without it.
    func showJSON(_ dir: String) -> [String: Any]? {
        let folder = (dir as NSString).appendingPathComponent(folder)
        // A crash's report before the next launch may still be its reserve, committed in place.
        let files = ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []).filter {
            suffix == ".crash"
                ? FileHeader.holdsCrashReport((folder as NSString).appendingPathComponent($0)) : $0.hasSuffix(suffix)
        }
        let command = ((ChildProcess.ownExecutable as NSString).deletingLastPathComponent as NSString)
            .appendingPathComponent("aftermath")
        guard let file = files.first, FileManager.default.isExecutableFile(atPath: command) else { return nil }
        let id = String(file.prefix { $0 != "." })  // a file name prefix `show` takes
        let run = ChildProcess.run(command, ["show", id, "--dir", dir, "--json"], environment: [:], timeout: 120)
        guard run.termination == .exited(0),
            let object = try? JSONSerialization.jsonObject(with: Data(run.standardOutput.utf8))
        else { return nil }
        return (object as? [[String: Any]])?.first ?? object as? [String: Any]
    }
}
