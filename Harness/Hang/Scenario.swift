import AftermathOTLP
import HarnessSupport
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// One row of the harness: runs children, returns what it saw and the failed checks.
struct Scenario {
    var name: String
    var summary: String
    var run: () -> (seen: String, failures: [String])

    static func int(_ record: LogRecord, _ key: String) -> Int? { record[attribute: key]?.intValue.map(Int.init) }
    static func string(_ record: LogRecord, _ key: String) -> String { record[text: key] ?? "" }

    /// Checks common to every hang record, plus the blocking function in the stack.
    static func checkHang(
        _ outcome: ChildOutcome, function: String, durationMs: ClosedRange<Int>?,
        unfinished: Bool, state: String? = nil, ownSession: Bool = true, otherThread: String? = nil
    ) -> (String, [String]) {
        var failures: [String] = []
        // Other records (an abnormal exit of a killed run) are not this harness's business.
        let hangs = outcome.records.filter { $0.eventName == "apsio.hang" }
        guard hangs.count == 1, let r = hangs.first else {
            return (
                "\(hangs.count) hang records \(outcome.stats)", ["expected 1 apsio.hang record, got \(hangs.count)"]
            )
        }
        let duration = int(r, "apsio.hang.duration") ?? -1
        let symbols = Parent.symbols(string(r, "exception.stacktrace"))
        let found = symbols.contains { $0.contains(function) }
        if r.eventName != "apsio.hang" { failures.append("eventName \(r.eventName ?? "none")") }
        if r.severityNumber.rawValue != 17 { failures.append("severity \(r.severityNumber.rawValue)") }
        if string(r, "apsio.hang.source") != "live" { failures.append("source") }
        if let range = durationMs, !range.contains(duration) {
            failures.append("duration \(duration) ms not in \(range)")
        }
        if (r[attribute: "apsio.hang.unfinished"]?.boolValue ?? false) != unfinished {
            failures.append("unfinished flag")
        }
        if !found { failures.append("\(function) not in stack (\(symbols.prefix(6).joined(separator: ", ")))") }
        if ownSession, string(r, "session.id") != outcome.session { failures.append("session.id") }
        if string(r, "log.record.uid").count != 26 { failures.append("log.record.uid") }
        if !string(r, "apsio.crash.images").contains("\"build_id\"") { failures.append("apsio.crash.images") }
        if let state, string(r, "apsio.hang.thread_state") != state {
            failures.append("thread_state \(string(r, "apsio.hang.thread_state")), expected \(state)")
        }
        // The other threads, each with its stack: the one the blocked thread waits for among them.
        var others = 0
        if let data = string(r, "apsio.threads").data(using: .utf8),
            let list = try? JSONSerialization.jsonObject(with: data) as? [[String: Any]]
        {
            others = list.count
            if let otherThread {
                let holder = list.first { entry in
                    Parent.symbols(entry["stacktrace"] as? String ?? "").contains { $0.contains(otherThread) }
                }
                if holder == nil {
                    // What each thread showed instead: its name, its first frames, how it was read.
                    let seen = list.map { entry in
                        "\(entry["name"] as? String ?? "?"): "
                            + (entry["stacktrace"] as? String ?? "").split(separator: "\n").prefix(6).joined(
                                separator: " < ")
                            + " [\(entry["context"] as? String ?? "")/\(entry["why"] as? String ?? "")]"
                    }
                    failures.append(
                        "no other thread in \(otherThread) in apsio.threads (" + seen.joined(separator: "; ") + ")")
                }
            }
        } else {
            failures.append("no apsio.threads")
        }
        let syscall = string(r, "apsio.hang.syscall_name")
        let seen =
            "\(duration) ms, \(string(r, "apsio.hang.thread_state"))\(syscall.isEmpty ? "" : "/" + syscall), "
            + "\(string(r, "apsio.hang.capture")), \(symbols.count) app frames\(found ? ", fn found" : "")"
            + (unfinished ? ", unfinished" : "") + ", \(others) others"
        return (seen, failures)
    }

    static func checkNone(_ outcome: ChildOutcome, directory: String) -> (String, [String]) {
        var failures: [String] = []
        let hangs = outcome.records.filter { $0.eventName == "apsio.hang" }
        if !hangs.isEmpty { failures.append("\(hangs.count) hang records") }
        let files = Parent.hangFiles(directory)
        if !files.isEmpty { failures.append("hang files left: \(files)") }
        if outcome.exitCode != 0 { failures.append("child exit \(outcome.exitCode.map(String.init) ?? "signal")") }
        return ("0 records (\(outcome.stats))", failures)
    }
}
