import AftermathOTLP
import HarnessSupport
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The harness's rows: each ends a real child in one way, then runs a next launch and checks
/// what it reported.
enum ExitScenarios {
    struct Row: Sendable {
        var name: String
        var expected: String
        var run: @Sendable () -> (got: String, ok: Bool?)
    }

    static let created = Mutex<[String]>([])

    static func tempDir(_ tag: String) -> String {
        var template = Array("/tmp/exit-harness-\(tag)-XXXXXX".utf8CString)
        guard let p = mkdtemp(&template) else { return "/tmp/exit-harness-\(tag)-\(getpid())" }
        let dir = String(cString: p)
        created.withLock { $0.append(dir) }
        return dir
    }

    /// A next launch over dir; its records.
    static func nextLaunch(_ dir: String, _ extra: [String] = []) -> [LogRecord] {
        guard let c = child(["report", dir] + extra) else { return [] }
        _ = c.waitForLine("REPORTED")
        return c.finish().records
    }

    /// Starts `exit-harness child <args>`, optionally through a shell prefix (cgroup entry).
    static func child(
        _ args: [String], shellPrefix: String? = nil, environment extra: [String: String] = [:]
    ) -> ChildProcess? {
        let exe = ChildProcess.ownExecutable
        var env = ProcessInfo.processInfo.environment
        env["SWIFT_BACKTRACE"] = "enable=no"
        for (k, v) in extra { env[k] = v }
        guard let shellPrefix else {
            return try? ChildProcess(exe, ["child"] + args, environment: env, inputPipe: true)
        }
        return try? ChildProcess(
            "/bin/sh", ["-c", shellPrefix + "; exec \"$0\" \"$@\"", exe, "child"] + args,
            environment: env, inputPipe: true)
    }

    static func abnormal(_ records: [LogRecord]) -> [LogRecord] {
        records.filter { $0.eventName == "app.abnormal_exit" }
    }

    static func describe(_ r: LogRecord) -> String {
        "\(r[text: "apsio.exit.reason"] ?? "?")/\(r[text: "apsio.exit.source"] ?? "?")"
    }

    /// Starts a waiting child; returns it with (current session, first session).
    static func waitingChild(_ dir: String, env: [String: String] = [:]) -> (ChildProcess, String, String)? {
        guard let c = child(["wait", dir], environment: env),
            let ready = c.waitForLine("READY")
        else { return nil }
        let parts = ready.split(separator: " ").map(String.init)
        guard parts.count == 3 else { return nil }
        return (c, parts[1], parts[2])
    }

    static let rows: [Row] = [
        Row(name: "clean exit", expected: "nothing") {
            let dir = tempDir("clean")
            guard let c = child(["clean", dir]) else { return ("spawn failed", false) }
            let status = c.finish().termination
            let a = abnormal(nextLaunch(dir))
            return ("\(status); \(a.isEmpty ? "nothing" : describe(a[0]))", status == .exited(0) && a.isEmpty)
        },
        Row(name: "execv of its own binary", expected: "nothing (same pid, start time)") {
            let dir = tempDir("exec")
            guard let c = child(["exec", dir]), let ready = c.waitForLine("READY") else {
                return ("child not ready", false)
            }
            let pid = c.waitForLine("PID").map { String($0.dropFirst(4)) } ?? "?"
            _ = c.waitForLine("REPORTED")
            let result = c.finish()
            let a = abnormal(result.records)
            let samePID = ready.dropFirst(6) == pid
            let ended = ((try? FileManager.default.contentsOfDirectory(atPath: dir + "/runs")) ?? []).filter {
                $0.hasSuffix(".ended")
            }
            return (
                "\(result.termination); pid \(samePID ? "kept" : "CHANGED"); \(a.isEmpty ? "nothing" : describe(a[0])); \(ended.count) run ended",
                result.termination == .exited(0) && samePID && a.isEmpty && ended.count == 1
            )
        },
        Row(name: "SIGKILL from outside", expected: "unknown/inferred, session+screen") {
            let dir = tempDir("kill")
            guard let (c, session, first) = waitingChild(dir) else { return ("child not ready", false) }
            c.signal(SIGKILL)
            let status = c.finish().termination
            let a = abnormal(nextLaunch(dir))
            guard a.count == 1 else { return ("\(status); \(a.count) abnormal exits", false) }
            let r = a[0]
            let sessionOK = r[text: "session.id"] == session && r[text: "session.previous_id"] == first
            let ok =
                status == .signaled(SIGKILL) && describe(r) == "unknown/inferred" && sessionOK
                && r[text: "app.screen.name"] == "checkout" && r[text: "apsio.exit.foreground"] == "true"
            return (
                "\(status); \(describe(r)), session \(sessionOK ? "ok" : "WRONG"), screen \(r[text: "app.screen.name"] ?? "-")",
                ok
            )
        },
        Row(name: "SIGTERM, not handled", expected: "dies of it; signal/platform") {
            let dir = tempDir("term")
            guard let (c, _, _) = waitingChild(dir) else { return ("child not ready", false) }
            c.signal(SIGTERM)
            let status = c.finish().termination
            let a = abnormal(nextLaunch(dir))
            guard a.count == 1 else { return ("\(status); \(a.count) abnormal exits", false) }
            let evidence = a[0][text: "apsio.exit.evidence"] ?? ""
            let ok =
                status == .signaled(SIGTERM) && describe(a[0]) == "signal/platform"
                && evidence.contains("SIGTERM from pid \(getpid())")
            return ("\(status); \(describe(a[0])) \"\(evidence)\"", ok)
        },
        Row(name: "SIGTERM, app's own handler exits", expected: "handler runs; nothing") {
            let dir = tempDir("handled")
            guard let c = child(["handle-term", dir]), c.waitForLine("READY") != nil else {
                return ("child not ready", false)
            }
            c.signal(SIGTERM)
            let status = c.finish().termination
            let ran = c.waitForLine("APP-HANDLER", timeout: 1) != nil
            let a = abnormal(nextLaunch(dir))
            return (
                "\(status); handler \(ran ? "ran" : "LOST"); \(a.isEmpty ? "nothing" : describe(a[0]))",
                status == .exited(0) && ran && a.isEmpty
            )
        },
        Row(name: "update between runs (1.0 -> 2.0)", expected: "nothing") {
            let dir = tempDir("update")
            guard let (c, _, _) = waitingChild(dir) else { return ("child not ready", false) }
            c.signal(SIGKILL)
            let status = c.finish().termination
            let a = abnormal(nextLaunch(dir, ["--version", "2.0"]))
            return ("\(status); \(a.isEmpty ? "nothing" : describe(a[0]))", status == .signaled(SIGKILL) && a.isEmpty)
        },
        Row(name: "reboot between runs (boot_id)", expected: "nothing") {
            let dir = tempDir("reboot")
            guard let (c, _, _) = waitingChild(dir) else { return ("child not ready", false) }
            c.signal(SIGKILL)
            let status = c.finish().termination
            let proc = tempDir("proc")
            try? FileManager.default.createDirectory(
                atPath: proc + "/sys/kernel/random", withIntermediateDirectories: true)
            try? (UUID().uuidString.lowercased() + "\n").write(
                toFile: proc + "/sys/kernel/random/boot_id", atomically: true, encoding: .utf8)
            let a = abnormal(nextLaunch(dir, ["--proc", proc]))
            return ("\(status); \(a.isEmpty ? "nothing" : describe(a[0]))", status == .signaled(SIGKILL) && a.isEmpty)
        },
        Row(name: "handled error, then crash", expected: "error + app.crash, one session") {
            let dir = tempDir("errcrash")
            guard let c = child(["error-crash", dir]), let ready = c.waitForLine("READY") else {
                return ("child not ready", false)
            }
            let session = String(ready.split(separator: " ").last ?? "")
            let status = c.finish().termination
            let records = nextLaunch(dir)
            let errors = records.filter { $0.severityNumber.rawValue == 17 && ($0.eventName ?? "") == "" }
            let crashes = records.filter { $0.eventName == "app.crash" }
            let sameSession = (errors + crashes).allSatisfy { $0[text: "session.id"] == session }
            let typeOK = errors.first?[text: "exception.type"]?.hasSuffix("HarnessError") ?? false
            let ok =
                status == .signaled(SIGSEGV) && errors.count == 1 && crashes.count == 1 && sameSession && typeOK
                && errors[0][text: "apsio.error.fingerprint"] == "payment-declined" && abnormal(records).isEmpty
            return (
                "\(status); \(errors.count) error, \(crashes.count) crash, session \(sameSession ? "same" : "DIFFERENT")",
                ok
            )
        },
        Row(name: "startNewSession(), then crash", expected: "app.crash, session + previous") {
            let dir = tempDir("sesscrash")
            guard let c = child(["session-crash", dir]), let ready = c.waitForLine("READY") else {
                return ("child not ready", false)
            }
            let parts = ready.split(separator: " ").map(String.init)
            let status = c.finish().termination
            let crashes = nextLaunch(dir).filter { $0.eventName == "app.crash" }
            guard parts.count == 3, crashes.count == 1 else { return ("\(status); \(crashes.count) crashes", false) }
            let session = crashes[0][text: "session.id"] == parts[1],
                previous = crashes[0][text: "session.previous_id"] == parts[2]
            return (
                "\(status); session \(session ? "ok" : "WRONG"), previous \(previous ? "ok" : "MISSING")",
                status == .signaled(SIGSEGV) && session && previous
            )
        },
        Row(name: "two instances at once", expected: "nothing, then nothing") {
            let dir = tempDir("two")
            guard let (a, _, _) = waitingChild(dir) else { return ("child not ready", false) }
            let during = abnormal(nextLaunch(dir))
            a.closeInput()
            let status = a.finish().termination
            let after = abnormal(nextLaunch(dir))
            return (
                "while alive: \(during.count), \(status), after: \(after.count)",
                during.isEmpty && after.isEmpty && status == .exited(0)
            )
        },
        Row(name: "unwinding helper: exec, then SIGKILL", expected: "one per image, none left") { helperRow() },
        Row(name: "OOM kill in a 50M cgroup (v1)", expected: "memory/platform") { oomRow() },
        Row(name: "unfinished hang, then SIGKILL", expected: "anr/inferred + apsio.hang") { hangRow(watchdog: false) },
        Row(name: "unfinished hang, systemd watchdog", expected: "watchdog/inferred") { hangRow(watchdog: true) },
        Row(name: "crash while delivering, 60 launches", expected: "each crash once, by a later launch") {
            DeliveryRace.row()
        },
    ]

    static func oomRow() -> (got: String, ok: Bool?) {
        let base = "/sys/fs/cgroup/memory"
        guard geteuid() == 0 else { return ("SKIPPED: not root", nil) }
        guard access(base + "/cgroup.procs", W_OK) == 0 else {
            return ("SKIPPED: no writable v1 memory controller at \(base)", nil)
        }
        let cg = base + "/aftermath-exit-\(getpid())"
        guard mkdir(cg, 0o755) == 0 || errno == EEXIST else {
            return ("SKIPPED: mkdir \(cg): \(String(cString: strerror(errno)))", nil)
        }
        defer {
            for _ in 0..<50 {
                if rmdir(cg) == 0 || errno == ENOENT { break }
                usleep(100_000)
            }
        }
        func put(_ file: String, _ value: String) -> Bool {
            (try? value.write(toFile: cg + "/" + file, atomically: false, encoding: .utf8)) != nil
        }
        guard put("memory.limit_in_bytes", "52428800") else {
            return ("SKIPPED: cannot set memory.limit_in_bytes", nil)
        }
        if access(cg + "/memory.memsw.limit_in_bytes", W_OK) == 0 { _ = put("memory.memsw.limit_in_bytes", "52428800") }
        let dir = tempDir("oom")
        guard let c = child(["oom", dir], shellPrefix: "echo $$ > \(cg)/cgroup.procs") else {
            return ("spawn failed", false)
        }
        let status = c.finish(timeout: 60).termination
        let a = abnormal(nextLaunch(dir))
        guard a.count == 1 else { return ("\(status); \(a.count) abnormal exits", false) }
        let evidence = a[0][text: "apsio.exit.evidence"] ?? ""
        return (
            "\(status); \(describe(a[0])) \"\(evidence)\"",
            status == .signaled(SIGKILL) && describe(a[0]) == "memory/platform"
                && evidence.contains("memory.oom_control")
        )
    }

    /// The resident unwinding helper lives as long as the image that started it: an exec ends
    /// it (the new image starts its own), and so does a SIGKILL of the app.
    static func helperRow() -> (got: String, ok: Bool?) {
        let dir = tempDir("helper")
        // The child names its helpers before it execs (the exec can come before we look).
        guard let c = child(["exec-wait", dir]), let line = c.waitForLine("HELPER-READY") else {
            return ("child not ready", false)
        }
        let pid = c.pid
        let before = line.split(separator: " ").dropFirst(2).compactMap { pid_t($0) }
        guard c.waitForLine("READY") != nil else {
            c.signal(SIGKILL)
            _ = c.finish()
            return ("exec'd image not ready", false)
        }
        let oldEnded = before.allSatisfy { UnwindHelperProcess.ended($0, formerParent: pid) }
        let after = UnwindHelperProcess.waitForHelpers(of: pid).filter { !before.contains($0) }
        c.signal(SIGKILL)
        let status = c.finish().termination
        let afterEnded = after.allSatisfy { UnwindHelperProcess.ended($0, formerParent: pid) }
        let ok = before.count == 1 && oldEnded && after.count == 1 && afterEnded && status == .signaled(SIGKILL)
        return (
            "\(before.count) helper, \(oldEnded ? "ended" : "LEFT") at exec; \(after.count) new, "
                + "\(afterEnded ? "ended" : "LEFT") at \(status)",
            ok
        )
    }

    static func hangRow(watchdog: Bool) -> (got: String, ok: Bool?) {
        let dir = tempDir(watchdog ? "watchdog" : "anr")
        guard let c = child(["hang", dir], environment: watchdog ? ["WATCHDOG_USEC": "3000000"] : [:]),
            c.waitForLine("READY") != nil
        else { return ("child not ready", false) }
        let deadline = Date().addingTimeInterval(5)
        var hangFiles: [String] = []
        while Date() < deadline && hangFiles.isEmpty {
            usleep(100_000)
            hangFiles = ((try? FileManager.default.contentsOfDirectory(atPath: dir + "/hangs")) ?? []).filter {
                $0.hasSuffix(".hang")
            }
        }
        usleep(400_000)
        c.signal(SIGKILL)
        let status = c.finish().termination
        let records = nextLaunch(dir)
        let a = abnormal(records)
        let hangs = records.filter { $0.eventName == "apsio.hang" }
        guard a.count == 1 else {
            return ("\(status); \(hangFiles.count) hang file(s); \(a.count) abnormal exits", false)
        }
        let want = watchdog ? "watchdog/inferred" : "anr/inferred"
        return ("\(status); \(describe(a[0])), \(hangs.count) apsio.hang", describe(a[0]) == want && hangs.count == 1)
    }

    /// The table's columns, after the row's name.
    enum Column: String, CaseIterable, Sendable, TableColumn {
        case expected, got
    }

    /// Runs every row (or those whose name contains filter); prints the table. True when none failed.
    static func runAll(filter: String?) -> Bool {
        var results: [TableRow<Column>] = []
        for row in rows where filter == nil || row.name.contains(filter!) {
            Table.progress("exit-harness", row.name)
            let start = Monotonic.seconds()
            let (got, ok) = row.run()
            let ms = Int((Monotonic.seconds() - start) * 1000)
            let check: TableCheck<Column>
            switch ok {
            case true?: check = .pass(.got, got)
            case false?: check = .fail(.got, got, got)
            case nil: check = .skip(.got, got)
            }
            results.append(
                TableRow(
                    scenario: row.name, checks: [.skip(.expected, row.expected), check],
                    milliseconds: ms, skipReason: ok == nil ? String(got.trimmingPrefix("SKIPPED: ")) : nil))
        }
        if !results.contains(where: \.failed) {
            for dir in created.withLock({ $0 }) { try? FileManager.default.removeItem(atPath: dir) }
        }
        return Table.print(results) == 0
    }
}
