import AftermathOTLP
import Foundation
import HarnessSupport
#if canImport(Glibc)
import Glibc
#endif

/// The rows of servers and daemons: event loops, the Swift concurrency pool, threads with a
/// loop of their own, units of work.
enum ServerRows {
    /// How this harness was built: the pool's rows run in both (CI builds a release one too).
    #if DEBUG
    static let optimization = "-Onone"
    #else
    static let optimization = "-O"
    #endif

    /// What one expected record must show.
    struct Expect {
        var kind: String
        var target: String
        var threadName: String?
        var function: String
        var durationMs: ClosedRange<Int>
        var unfinished = false
    }

    /// Checks that the hang records are exactly `expected`, in order of their time.
    static func check(_ outcome: ChildOutcome, _ expected: [Expect], ownSession: Bool = true) -> (String, [String]) {
        let hangs = outcome.records.filter { $0.eventName == "apsio.hang" }.sorted { $0.timeUnixNano < $1.timeUnixNano }
        var failures: [String] = []
        if hangs.count != expected.count {
            failures.append("expected \(expected.count) apsio.hang records, got \(hangs.count)")
        }
        var seen: [String] = []
        for (r, e) in zip(hangs, expected) {
            let kind = Scenario.string(r, "apsio.hang.kind"), target = Scenario.string(r, "apsio.hang.target")
            let name = Scenario.string(r, "thread.name")
            let duration = Scenario.int(r, "apsio.hang.duration") ?? -1
            let symbols = Parent.symbols(Scenario.string(r, "exception.stacktrace"))
            if kind != e.kind { failures.append("kind \(kind), expected \(e.kind)") }
            if target != e.target { failures.append("target \(target), expected \(e.target)") }
            if let n = e.threadName, name != n { failures.append("thread.name \(name), expected \(n)") }
            if !e.durationMs.contains(duration) {
                failures.append("\(target): duration \(duration) ms not in \(e.durationMs)")
            }
            if !symbols.contains(where: { $0.contains(e.function) }) {
                failures.append("\(target): \(e.function) not in stack (\(symbols.prefix(6).joined(separator: ", ")))")
            }
            if (r[attribute: "apsio.hang.unfinished"]?.boolValue ?? false) != e.unfinished {
                failures.append("\(target): unfinished flag")
            }
            if ownSession, Scenario.string(r, "session.id") != outcome.session { failures.append("session.id") }
            seen.append("\(kind) \(name.isEmpty ? target : name) \(duration) ms")
        }
        let ids = Set(hangs.map { Scenario.int($0, "thread.id") ?? 0 })
        if expected.count > 1, expected.allSatisfy({ $0.kind != "concurrency_pool" }), ids.count != hangs.count {
            failures.append("thread.id not distinct")
        }
        let uids = hangs.map { Scenario.string($0, "log.record.uid") }
        if Set(uids).count != uids.count { failures.append("a record exported twice") }
        return (seen.isEmpty ? "0 records (\(outcome.stats))" : seen.joined(separator: "; "), failures)
    }

    static func figure(_ outcome: ChildOutcome, _ key: String) -> Double? {
        for line in outcome.lines where line.hasPrefix("FIGURE ") {
            for pair in line.dropFirst(7).split(separator: " ") {
                let kv = pair.split(separator: "=")
                if kv.count == 2, kv[0] == key { return Double(kv[1]) }
            }
        }
        return nil
    }

    /// One record per target, in turn: (target, thread name) each.
    static func inTurn(
        _ kind: String, _ targets: [(String, String)], function: String, durationMs: ClosedRange<Int>
    ) -> [Expect] {
        targets.map { Expect(kind: kind, target: $0.0, threadName: $0.1, function: function, durationMs: durationMs) }
    }

    static func row(_ name: String, _ expected: [Expect]) -> () -> (String, [String]) {
        {
            let dir = Parent.makeDirectory(name)
            var (seen, failures) = check(Parent.runChild(["child", name, dir]), expected)
            if !Parent.hangFiles(dir).isEmpty { failures.append("hang file not deleted after export") }
            return (seen, failures)
        }
    }

    /// The pool's record: every thread inside a Swift job listed, the blocked ones counted.
    static func poolRow(_ name: String, state: String, function: String) -> () -> (String, [String]) {
        {
            let dir = Parent.makeDirectory(name)
            let outcome = Parent.runChild(["child", name, dir])
            let width = outcome.lines.first { $0.hasPrefix("WIDTH ") }.flatMap { Int($0.dropFirst(6)) }
            var (seen, failures) = check(
                outcome,
                [
                    Expect(
                        kind: "concurrency_pool", target: "concurrency-pool.medium", function: function,
                        durationMs: 1000...3200)
                ])
            guard let r = outcome.records.first(where: { $0.eventName == "apsio.hang" }) else {
                return (seen, failures)
            }
            let poolWidth = Scenario.int(r, "apsio.hang.pool.width") ?? -1
            let blocked = Scenario.int(r, "apsio.hang.pool.blocked") ?? -1
            let busy = Scenario.int(r, "apsio.hang.pool.busy") ?? -1
            let jobs = Scenario.int(r, "apsio.hang.pool.jobs") ?? -1
            if let width, poolWidth != width { failures.append("pool.width \(poolWidth), expected \(width)") }
            if Scenario.string(r, "apsio.hang.pool.state") != state {
                failures.append("pool.state \(Scenario.string(r, "apsio.hang.pool.state")), expected \(state)")
            }
            let expectedJobs = poolWidth
            if jobs < expectedJobs { failures.append("pool.jobs \(jobs) < width \(expectedJobs)") }
            if state == "blocked", blocked < expectedJobs {
                failures.append("pool.blocked \(blocked) < \(expectedJobs)")
            }
            let list =
                (try? JSONSerialization.jsonObject(with: Data(Scenario.string(r, "apsio.threads").utf8)))
                as? [[String: Any]]
                ?? []
            let workers = list.filter { $0["swift_job"] as? Bool == true }
            let inFunction = workers.filter { entry in
                Parent.symbols(entry["stacktrace"] as? String ?? "").contains { $0.contains(function) }
            }
            if workers.count != jobs { failures.append("\(workers.count) swift_job threads listed, pool.jobs \(jobs)") }
            // A running worker's stack is read wherever it is (a leaf without a frame record
            // hides its caller), so one is enough there.
            // Blocked: at least half of them (and the record's own stack, checked above); one
            // waits in a different libdispatch path at times (Swift 6.0's).
            let needed = state == "blocked" ? (expectedJobs + 1) / 2 : 1
            if inFunction.count < needed { failures.append("\(inFunction.count) workers in \(function)") }
            seen += ", width \(poolWidth), jobs \(jobs), blocked \(blocked), busy \(busy), \(optimization)"
            // A spinning worker is read wherever the signal finds it, often a leaf without a frame
            // record, whose walk may miss its function and swift_job_run alike: the kind, the state
            // and at least one worker inside a job are checked.
            if !outcome.lines.contains("SIGPROF default") { failures.append("SIGPROF not given back to its default") }
            if state == "saturated" {
                failures.removeAll {
                    $0.contains("not in stack") || $0.contains("workers in") || $0.contains("pool.jobs")
                        || $0.contains("swift_job threads listed")
                }
                if jobs < 1 { failures.append("no worker seen inside a Swift job") }
            }
            return (seen, failures)
        }
    }

    static var scenarios: [Scenario] {
        [
            Scenario(
                name: "srv-loop", summary: "event loop blocked 2 s (of two loops)",
                run: row(
                    "srv-loop",
                    [
                        Expect(
                            kind: "event_loop", target: "loop-0", threadName: "NIO-ELT-0-#0",
                            function: "hangHarnessLoopBlock", durationMs: 1850...2250)
                    ])),
            Scenario(
                name: "srv-loop2", summary: "two loops blocked one after the other",
                run: row(
                    "srv-loop2",
                    inTurn(
                        "event_loop", [("loop-0", "NIO-ELT-0-#0"), ("loop-1", "NIO-ELT-0-#1")],
                        function: "hangHarnessLoopBlock", durationMs: 1050...1450))),
            Scenario(
                name: "srv-loop-idle", summary: "8 idle loops, 10 s: no record, no wake-ups",
                run: {
                    let dir = Parent.makeDirectory("srv-loop-idle")
                    let outcome = Parent.runChild(["child", "srv-loop-idle", dir], timeout: 30)
                    var (seen, failures) = check(outcome, [])
                    let wakes = figure(outcome, "wakeups_per_s_max") ?? -1,
                        cpu = figure(outcome, "watchdog_cpu_pct") ?? -1
                    if wakes < 0 || wakes > 1.0 {
                        failures.append("an idle loop woke \(wakes) times a second (budget 1)")
                    }
                    // The CPU figure is the benchmark's (aftermath-bench loops, release); here it is shown.
                    if cpu < 0 { failures.append("no watchdog CPU figure") }
                    // One descriptor a loop, its system call's file; its CPU time is its CPU clock.
                    let fds = figure(outcome, "task_fds") ?? -1
                    if fds < 0 || fds > 8 {
                        failures.append("\(Int(fds)) descriptors on the loops' /proc files (8 loops)")
                    }
                    seen += String(
                        format: ", loop wake-ups %.2f/s, watchdog CPU %.3f %%, %d /proc descriptors", wakes, cpu,
                        Int(fds))
                    return (seen, failures)
                }),
            Scenario(
                name: "srv-loop-busy", summary: "a loop busy with 1 ms jobs, 5 s",
                run: {
                    let dir = Parent.makeDirectory("srv-loop-busy")
                    let outcome = Parent.runChild(["child", "srv-loop-busy", dir])
                    var (seen, failures) = check(outcome, [])
                    let pings = figure(outcome, "pings_per_s") ?? -1
                    if pings < 0 || pings > 10.5 { failures.append("\(pings) pings a second (budget 10)") }
                    seen += String(format: ", %.1f pings/s", pings)
                    return (seen, failures)
                }),
            Scenario(
                name: "srv-loop-kill", summary: "loop stuck, SIGKILL, next launch",
                run: {
                    let dir = Parent.makeDirectory("srv-loop-kill")
                    let first = Parent.runChild(["child", "srv-loop-kill", dir]) { line, pid in
                        if line == "BLOCKING" {
                            DispatchQueue.global().asyncAfter(deadline: .now() + 2) { kill(pid, SIGKILL) }
                        }
                    }
                    var failures: [String] = []
                    if first.killedBySignal != SIGKILL { failures.append("first child not killed") }
                    let second = Parent.runChild(["child", "collect", dir])
                    var (seen, more) = check(
                        second,
                        [
                            Expect(
                                kind: "event_loop", target: "loop-0", threadName: "NIO-ELT-0-#0",
                                function: "hangHarnessLoopForever", durationMs: 1000...2300, unfinished: true)
                        ],
                        ownSession: false)
                    failures += more
                    let exit = second.records.first { $0.eventName == "app.abnormal_exit" }
                    let evidence = exit.map { Scenario.string($0, "apsio.exit.evidence") } ?? ""
                    if exit == nil { failures.append("no app.abnormal_exit") }
                    if !evidence.contains("loop-0") {
                        failures.append("exit evidence does not name the loop: \(evidence)")
                    }
                    seen += "; exit: \(evidence)"
                    return (seen, failures)
                }),
            Scenario(
                name: "srv-no-pool", summary: "pool watched, never used: no probe, no pool thread",
                run: {
                    let outcome = Parent.runChild(["child", "srv-no-pool", Parent.makeDirectory("srv-no-pool")])
                    var (seen, failures) = check(outcome, [])
                    let line = outcome.lines.first { $0.hasPrefix("THREADS ") }.map { String($0.dropFirst(8)) }
                    guard let line else { return (seen, failures + ["no THREADS line"]) }
                    let names = line.split(separator: ",").map(String.init)
                    let others = names.filter { !$0.hasPrefix("aftermath.") && $0 != "hang-harness" }
                    if !others.isEmpty { failures.append("threads besides main and Aftermath's: \(others)") }
                    seen = "\(names.count) threads: \(line)"
                    return (seen, failures)
                }),
            Scenario(
                name: "srv-pool-app-sigprof", summary: "pool saturated, SIGPROF the app's: left to it",
                run: {
                    let outcome = Parent.runChild(
                        ["child", "srv-pool-app-sigprof", Parent.makeDirectory("srv-pool-app-sigprof")])
                    var (seen, failures) = check(
                        outcome,
                        [
                            Expect(
                                kind: "concurrency_pool", target: "concurrency-pool.medium",
                                function: "hangHarnessBusyLoop", durationMs: 1000...3200)
                        ])
                    // Its stack is the one thing it cannot have: no worker could be read.
                    failures.removeAll { $0.contains("not in stack") }
                    if !outcome.lines.contains("SIGPROF kept") {
                        failures.append("the app's SIGPROF handler was replaced")
                    }
                    let hang = outcome.records.first { $0.eventName == "apsio.hang" }
                    let list =
                        (try? JSONSerialization.jsonObject(
                            with: Data((hang.map { Scenario.string($0, "apsio.threads") } ?? "").utf8)))
                        as? [[String: Any]] ?? []
                    // No SIGPROF sent: the app's handler never ran. A spinning worker that ran a
                    // probe first lets the capture signal through; the others are listed bare.
                    if !outcome.lines.contains("SIGPROF calls 0") {
                        failures.append(
                            "the app's SIGPROF handler ran: \(outcome.lines.filter { $0.hasPrefix("SIGPROF calls") })")
                    }
                    let spinning = list.filter { $0["state"] as? String == "R" && $0["aftermath"] as? Bool != true }
                    if spinning.isEmpty { failures.append("no running worker listed") }
                    let bare = spinning.filter { $0["why"] as? String == "blocks_signal" }.count
                    seen += ", \(spinning.count) running workers (\(bare) without registers), SIGPROF kept, never sent"
                    return (seen, failures)
                }),
            Scenario(
                name: "srv-pool", summary: "pool starved: every worker in a semaphore, 3 awaits deep",
                run: poolRow("srv-pool", state: "blocked", function: "level3")),
            Scenario(
                name: "srv-pool-busy", summary: "pool saturated: every worker spinning 2 s",
                run: poolRow("srv-pool-busy", state: "saturated", function: "hangHarnessBusyLoop")),
            Scenario(
                name: "srv-thread", summary: "two beating daemon threads blocked in turn",
                run: row(
                    "srv-thread",
                    inTurn(
                        "thread", [("daemon-a", "daemon-a"), ("daemon-b", "daemon-b")],
                        function: "hangHarnessThreadBlock", durationMs: 1050...1350))),
            Scenario(
                name: "srv-work", summary: "a unit of work 1 s past its 300 ms threshold",
                run: row(
                    "srv-work",
                    [
                        Expect(
                            kind: "work", target: "request", function: "hangHarnessSlowRequest", durationMs: 950...1150)
                    ])),
            Scenario(
                name: "srv-all-stop", summary: "every kind watched, SIGSTOP 2 s, SIGCONT", run: stopped("srv-all-stop")),
            Scenario(
                name: "srv-all-tracer", summary: "loop, thread, unit and pool stuck under strace -f",
                run: traced("srv-all-tracer")),
        ]
    }
}
