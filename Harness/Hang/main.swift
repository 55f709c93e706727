import HarnessSupport
import Foundation
#if canImport(Glibc)
import Glibc
#endif

// hang-harness: real child processes hang in known ways; their records are checked.
//   hang-harness                       run every scenario, print a table, exit 1 on failure
//   hang-harness child <scenario> <dir>  (internal) one child

let arguments = CommandLine.arguments
if arguments.count >= 4, arguments[1] == "child" {
    Child.run(arguments[2], directory: arguments[3])
}

func live(
    _ name: String, _ function: String, state: String? = nil, range: ClosedRange<Int>? = 900...1100,
    otherThread: String? = nil
) -> () -> (String, [String]) {
    {
        let dir = Parent.makeDirectory(name)
        let outcome = Parent.runChild(["child", name, dir])
        var (seen, failures) = Scenario.checkHang(
            outcome, function: function, durationMs: range,
            unfinished: false, state: state, otherThread: otherThread)
        if !Parent.hangFiles(dir).isEmpty { failures.append("hang file not deleted after export") }
        return (seen, failures)
    }
}

func none(
    _ name: String, launcher: [String] = [], onLine: @escaping @Sendable (String, pid_t) -> Void = { _, _ in },
    extra: @escaping (ChildOutcome) -> [String] = { _ in [] }
) -> () -> (String, [String]) {
    {
        let dir = Parent.makeDirectory(name)
        let outcome = Parent.runChild(["child", name, dir], launcher: launcher, onLine: onLine)
        var (seen, failures) = Scenario.checkNone(outcome, directory: dir)
        failures += extra(outcome)
        return (seen, failures)
    }
}

/// A live hang's export in progress when SIGTERM comes: exported once, never again at the next
/// launch.
func termDuringExport() -> (String, [String]) {
    let dir = Parent.makeDirectory("termexport")
    let first = Parent.runChild(["child", "termexport", dir]) { line, pid in
        if line.hasPrefix("EXPORTING ") { kill(pid, SIGTERM) }
    }
    let handed = first.lines.filter { $0.hasPrefix("EXPORTING ") }.map { String($0.dropFirst(10)) }
    let second = Parent.runChild(["child", "collect", dir])
    let again = second.records.filter { $0.eventName == "apsio.hang" }.map { $0[text: "log.record.uid"] ?? "" }
    var failures: [String] = []
    if handed.count != 1 { failures.append("\(handed.count) hand-offs in the first run") }
    // Ended by the SIGTERM once the hand-off is over, or by its own exit, which may come first.
    if let signal = first.killedBySignal, signal != SIGTERM { failures.append("first child ended by signal \(signal)") }
    let total = handed.count + again.count
    if total != 1 {
        failures.append("the hang was exported \(total) times (\(handed.count) live, \(again.count) next launch)")
    }
    if !Parent.hangFiles(dir).isEmpty { failures.append("hang file left: \(Parent.hangFiles(dir))") }
    return ("\(handed.count) live, \(again.count) at the next launch", failures)
}

/// A child stopped for 2 s once it says READY: no record (the stats show whether a late tick was seen).
func stopped(_ name: String, after delay: useconds_t = 0) -> () -> (String, [String]) {
    none(
        name,
        onLine: { line, pid in
            if line == "READY" {
                DispatchQueue.global().async {
                    usleep(delay)
                    kill(pid, SIGSTOP)
                    usleep(2_000_000)
                    kill(pid, SIGCONT)
                }
            }
        })
    // The row's property: a stop is no hang (no record). Whether the watchdog also saw a late
    // tick (late= in the stats shown) depends on its sleeping with a deadline across the stop:
    // with no target needing ticks then (idle loops, a pool not used yet) it sleeps without one,
    // and nothing is late. CI's clean runs saw both.
}

/// A child under strace -f: no record, and the stretch ignored.
func traced(_ name: String) -> () -> (String, [String]) {
    {
        guard let strace else { return ("strace not installed", ["strace not installed (apt-get install strace)"]) }
        return none(
            name, launcher: [strace, "-f", "-o", "/dev/null"],
            extra: { $0.stats.contains("ignored=0") ? ["stretch not ignored"] : [] })()
    }
}

/// An idle main run loop costs no pings once its wait is learned (from the 6th ping on; in 1.5 s
/// of idling at least 5 ticks skip theirs), and a job then waiting in a ppoll of its own,
/// the run loop's call from deeper in the stack, is a hang all the same.
func idlePoll() -> (String, [String]) {
    let dir = Parent.makeDirectory("idlepoll")
    let outcome = Parent.runChild(["child", "idlepoll", dir])
    var (seen, failures) = Scenario.checkHang(
        outcome, function: "hangHarnessPoll", durationMs: 900...1100, unfinished: false, state: "sleeping")
    let idle = outcome.lines.first { $0.hasPrefix("IDLE ") } ?? ""
    let skips = idle.split(separator: " ").first { $0.hasPrefix("skips=") }.flatMap { Int($0.dropFirst(6)) } ?? 0
    if skips < 5 { failures.append("the idle run loop skipped \(skips) pings in 1.5 s (\(idle))") }
    seen += ", \(idle.dropFirst(5))"
    return (seen, failures)
}

let strace = ["/usr/bin/strace", "/bin/strace"].first { FileManager.default.isExecutableFile(atPath: $0) }

let scenarios: [Scenario] = [
    Scenario(
        name: "live1s", summary: "main thread blocked 1 s, recovers",
        run: live("live1s", "hangHarnessWaitOnSemaphore")),
    Scenario(
        name: "kill", summary: "blocked, SIGKILL after 2 s, next launch",
        run: {
            let dir = Parent.makeDirectory("kill")
            let first = Parent.runChild(["child", "kill", dir]) { line, pid in
                if line == "BLOCKING" { DispatchQueue.global().asyncAfter(deadline: .now() + 2) { kill(pid, SIGKILL) } }
            }
            var failures: [String] = []
            if first.killedBySignal != SIGKILL { failures.append("first child not killed") }
            let second = Parent.runChild(["child", "collect", dir])
            let (seen, more) = Scenario.checkHang(
                second, function: "hangHarnessBlockForever", durationMs: 1700...2300,
                unfinished: true, ownSession: false)
            failures += more
            if !Parent.hangFiles(dir).isEmpty { failures.append("hang file not deleted after export") }
            if let r = second.records.first(where: { $0.eventName == "apsio.hang" }),
                Scenario.string(r, "session.id") != first.session
            {
                failures.append("session.id \(Scenario.string(r, "session.id")) is not the hung run's \(first.session)")
            }
            return (seen, failures)
        }),
    Scenario(
        name: "lock", summary: "blocked in a mutex held by another thread",
        run: live("lock", "hangHarnessLockWait", state: "sleeping", otherThread: "hangHarnessLockWait")),
    Scenario(name: "sleep", summary: "blocked in usleep", run: live("sleep", "hangHarnessSleep", state: "sleeping")),
    Scenario(name: "busy", summary: "busy loop 1 s", run: live("busy", "hangHarnessBusyLoop", state: "running")),
    Scenario(name: "idlepoll", summary: "idle run loop unpinged, then its own ppoll 1 s", run: idlePoll),
    Scenario(name: "stall200", summary: "five stalls of 200 ms", run: none("stall200")),
    Scenario(name: "sigstop", summary: "SIGSTOP 2 s, SIGCONT", run: stopped("sigstop", after: 200_000)),
    Scenario(name: "tracer", summary: "blocked 1 s under strace -f", run: traced("tracer")),
    Scenario(name: "termexport", summary: "SIGTERM while a live hang is exported", run: termDuringExport),
    Scenario(
        name: "heartbeat", summary: "own loop with heartbeat(), blocked 1 s",
        run: live("heartbeat", "hangHarnessWaitOnSemaphore")),
    Scenario(
        name: "dispatchmain", summary: "dispatchMain(), main-queue block 1 s",
        run: live("dispatchmain", "hangHarnessWaitOnSemaphore")),
    Scenario(
        name: "dmbusy", summary: "dispatchMain(), busy loop 1 s",
        run: live("dmbusy", "hangHarnessBusyLoop", state: "running")),
    Scenario(
        name: "dmsleep", summary: "dispatchMain(), usleep 1 s",
        run: live("dmsleep", "hangHarnessSleep", state: "sleeping")),
    Scenario(
        name: "asyncbusy", summary: "async main, @MainActor busy loop 1 s",
        run: live("asyncbusy", "hangHarnessBusyLoop", state: "running")),
    Scenario(
        name: "asyncblock", summary: "async main, @MainActor blocked 1 s",
        run: live("asyncblock", "hangHarnessWaitOnSemaphore", state: "sleeping")),
    Scenario(
        name: "asyncsleep", summary: "async main, @MainActor usleep 1 s",
        run: live("asyncsleep", "hangHarnessSleep", state: "sleeping")),
    Scenario(
        name: "urgowner", summary: "app owns SIGURG, busy loop 1 s",
        run: live("urgowner", "hangHarnessBusyLoop", state: "running")),
    Scenario(
        name: "loaderlock", summary: "first hang inside the loader's lock (dl_iterate_phdr), 1 s",
        run: {
            // The capture cannot wait for libunwind (its load waits for that lock): frame
            // pointers within its bounded wait, the watchdog never blocked; libunwind loaded after.
            let dir = Parent.makeDirectory("loaderlock")
            let outcome = Parent.runChild(["child", "loaderlock", dir])
            var (seen, failures) = Scenario.checkHang(
                outcome, function: "hang_harness_loader_lock_callback", durationMs: 900...1100,
                unfinished: false, state: "sleeping", otherThread: nil)
            if !outcome.lines.contains("LIBUNWIND loaded") { failures.append("libunwind not loaded after the hang") }
            if !Parent.hangFiles(dir).isEmpty { failures.append("hang file not deleted after export") }
            return (seen, failures)
        }),
    Scenario(
        name: "first", summary: "first main-queue job after start, 1.5 s, x5",
        run: {
            var seen: [String] = [], failures: [String] = []
            for attempt in 1...5 {
                let (s, f) = live("first", "hangHarnessWaitOnSemaphore", range: 1350...1650)()
                seen.append(f.isEmpty ? "ok" : s)
                failures += f.map { "#\(attempt): \($0)" }
            }
            return (
                "\(seen.filter { $0 == "ok" }.count)/5 recorded"
                    + (failures.isEmpty ? "" : " (\(seen.first { $0 != "ok" } ?? ""))"), failures
            )
        }),
]

let allScenarios = scenarios + ServerRows.scenarios

/// The table's columns, after the scenario's name.
enum Column: String, CaseIterable, Sendable, TableColumn {
    case what, seen
}

let only = arguments.count >= 2 ? Set(arguments.dropFirst()) : nil
var rows: [TableRow<Column>] = []
for scenario in allScenarios where only == nil || only!.contains(scenario.name) {
    Table.progress("hang-harness", scenario.name)
    let started = Monotonic.seconds()
    let (seen, failures) = scenario.run()
    let result: TableCheck<Column> =
        failures.isEmpty ? .pass(.seen, seen) : .fail(.seen, seen, failures.joined(separator: "; "))
    rows.append(
        TableRow(
            scenario: scenario.name, checks: [.skip(.what, scenario.summary), result],
            milliseconds: Int((Monotonic.seconds() - started) * 1000)))
}
exit(Table.print(rows))
