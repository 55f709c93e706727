import AftermathNextLaunch
import AftermathOTLP
import CSignalShim
import TestSupport
import Foundation
import Testing

/// The inference rules as a table over crafted run files and crafted /proc and /sys trees.
@Suite("Exit inference")
struct ExitInferenceTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var v1 = true, v2 = true
        var foreground = true
        var watchdogUsec: UInt64 = 0
        var crashed = false
        var hangMs: UInt64?
        var environment: @Sendable (CraftedSystem) -> ExitEnvironment = { $0.environment() }
        /// Changes the run file (what the run recorded).
        var run: @Sendable (inout aft_run_file) -> Void = { _ in }
        /// Changes the system after the run ended (what the next launch reads).
        var after: @Sendable (CraftedSystem) throws -> Void = { _ in }
        /// "reason/source", or "nothing".
        var expected: String
        var testDescription: String { name }
    }

    static func term(_ disposition: UInt32) -> @Sendable (inout aft_run_file) -> Void {
        { file in
            file.term.signal = SIGTERM
            file.term.code = 0
            file.term.sender_pid = 1
            file.term.sender_uid = 0
            file.term.count = 1
            file.term.time_realtime_ns = 1_700_000_000_500_000_000
            file.term.disposition = disposition
            RunBytes.sealTerm(&file.term)
        }
    }

    /// CLOCK_BOOTTIME an hour from now: a next launch long after the run's last update.
    static func anHourLater() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_BOOTTIME, &ts)
        return UInt64(ts.tv_sec + 3600) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    static let oomV1 = "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n"
    static let oomV2 = "low 0\nhigh 0\nmax 9\noom 1\noom_kill 1\noom_group_kill 0\n"
    static let groupV2 = "low 0\nhigh 0\nmax 9\noom 1\noom_kill 0\noom_group_kill 1\n"

    static let cases: [Case] = [
        Case(name: "no evidence", expected: "unknown/inferred"),
        Case(
            name: "v1 own cgroup oom_kill rose",
            after: { try $0.set("sys/fs/cgroup/memory/app/svc/memory.oom_control", oomV1) },
            expected: "memory/platform"),
        Case(
            name: "v1 parent cgroup oom_kill rose",
            after: { try $0.set("sys/fs/cgroup/memory/app/memory.oom_control", oomV1) },
            expected: "memory/platform"),
        Case(
            name: "v2 own memory.events oom_kill rose", v1: false,
            after: { try $0.set("sys/fs/cgroup/app/svc/memory.events", oomV2) },
            expected: "memory/platform"),
        Case(
            name: "v2 own oom_group_kill rose", v1: false,
            after: { try $0.set("sys/fs/cgroup/app/svc/memory.events", groupV2) },
            expected: "memory/platform"),
        Case(
            name: "v2 parent oom_kill rose", v1: false, after: { try $0.set("sys/fs/cgroup/app/memory.events", oomV2) },
            expected: "memory/platform"),
        Case(
            name: "cgroup removed after the run", v1: false,
            after: { try FileManager.default.removeItem(atPath: $0.sys + "/fs/cgroup/app") },
            expected: "unknown/inferred"),
        Case(
            name: "counter reset (cgroup recreated)",
            run: { f in
                f.live.1.oom.0 = 3
                RunBytes.sealLive(&f.live.1)
            },
            expected: "unknown/inferred"),
        Case(
            name: "system vmstat oom_kill rose, no memory cgroup", v1: false, v2: false,
            after: { try $0.set("proc/vmstat", "oom_kill 6\n") }, expected: "memory/inferred"),
        Case(
            name:
                "system vmstat oom_kill rose, the own cgroup's counter readable and not risen (another process's kill)",
            after: { try $0.set("proc/vmstat", "oom_kill 6\n") }, expected: "unknown/inferred"),
        Case(
            name: "system vmstat oom_kill rose, the own v2 cgroup's counter readable and not risen", v1: false,
            after: { try $0.set("proc/vmstat", "oom_kill 6\n") }, expected: "unknown/inferred"),
        Case(
            name: "PSI high at the last update",
            run: { f in
                f.live.1.psi_some_avg10_centi = 5500
                RunBytes.sealLive(&f.live.1)
            },
            expected: "memory/inferred"),
        Case(
            name: "PSI low at the last update",
            run: { f in
                f.live.1.psi_some_avg10_centi = 1200
                RunBytes.sealLive(&f.live.1)
            },
            expected: "unknown/inferred"),
        Case(name: "SIGTERM, default action", run: term(AFT_TERM_DEFAULT), expected: "signal/platform"),
        Case(name: "SIGTERM, app handler, no exit", run: term(AFT_TERM_HANDLER), expected: "signal/platform"),
        Case(
            name: "SIGTERM then clean exit",
            run: { f in
                term(AFT_TERM_HANDLER)(&f)
                f.exit.clean = AFT_RUN_CLEAN_MARKER
                RunBytes.sealExit(&f.exit)
            }, expected: "nothing"),
        Case(
            name: "SIGTERM default wins over a cgroup rise", run: term(AFT_TERM_DEFAULT),
            after: { try $0.set("sys/fs/cgroup/memory/app/svc/memory.oom_control", oomV1) }, expected: "signal/platform"
        ),
        Case(
            name: "cgroup rise wins over an app-handled SIGTERM", run: term(AFT_TERM_HANDLER),
            after: { try $0.set("sys/fs/cgroup/memory/app/svc/memory.oom_control", oomV1) }, expected: "memory/platform"
        ),
        Case(
            name: "clean exit",
            run: { f in
                f.exit.clean = AFT_RUN_CLEAN_MARKER
                RunBytes.sealExit(&f.exit)
            }, expected: "nothing"),
        Case(
            name: "crash report of the run", crashed: true,
            after: { try $0.set("sys/fs/cgroup/memory/app/svc/memory.oom_control", oomV1) }, expected: "nothing"),
        Case(
            name: "reboot (boot_id changed)",
            after: { try $0.set("proc/sys/kernel/random/boot_id", UUID().uuidString.lowercased()) },
            expected: "nothing"),
        Case(name: "update (service.version)", environment: { $0.environment(version: "1.1") }, expected: "nothing"),
        Case(name: "update (app.build_id)", environment: { $0.environment(buildID: "ffff") }, expected: "nothing"),
        Case(
            name: "OS update",
            environment: { s in
                var e = s.environment()
                e.osVersion = "13"
                return e
            }, expected: "nothing"),
        Case(
            name: "kernel update",
            environment: { s in
                var e = s.environment()
                e.kernelRelease = "6.2.0"
                return e
            }, expected: "nothing"),
        Case(
            name: "debugger seen",
            run: { f in
                f.live.1.debugger_seen = 1
                f.live.1.tracer_pid = 77
                RunBytes.sealLive(&f.live.1)
            },
            expected: "nothing"),
        Case(name: "background, no evidence", foreground: false, expected: "nothing"),
        Case(
            name: "background, cgroup OOM kill", foreground: false,
            after: { try $0.set("sys/fs/cgroup/memory/app/svc/memory.oom_control", oomV1) }, expected: "memory/platform"
        ),
        Case(name: "background, unfinished hang", foreground: false, hangMs: 4000, expected: "nothing"),
        Case(name: "unfinished hang", hangMs: 4000, expected: "anr/inferred"),
        Case(
            name: "unfinished hang, WATCHDOG_USEC", watchdogUsec: 3_000_000, hangMs: 4000, expected: "watchdog/inferred"
        ),
        Case(name: "WATCHDOG_USEC without a hang", watchdogUsec: 3_000_000, expected: "unknown/inferred"),
        Case(
            name: "system vmstat oom_kill rose, judged an hour after the run's last update", v1: false, v2: false,
            environment: { s in
                var e = s.environment()
                e.boottimeNanoseconds = Self.anHourLater()
                return e
            },
            after: { try $0.set("proc/vmstat", "oom_kill 6\n") }, expected: "unknown/inferred"),
        Case(
            name: "unfinished hang and vmstat rise, judged an hour later", v1: false, v2: false, hangMs: 900,
            environment: { s in
                var e = s.environment()
                e.boottimeNanoseconds = Self.anHourLater()
                return e
            },
            after: { try $0.set("proc/vmstat", "oom_kill 9\n") }, expected: "anr/inferred"),
        Case(
            name: "system vmstat oom_kill rose, judged in another boot", v1: false, v2: false,
            environment: { s in
                var e = s.environment()
                e.boottimeNanoseconds = 1_000_000_000
                return e
            },
            after: { try $0.set("proc/vmstat", "oom_kill 6\n") }, expected: "unknown/inferred"),
        Case(
            name: "PSI high at the last update, judged an hour later (read at the last update)",
            environment: { s in
                var e = s.environment()
                e.boottimeNanoseconds = Self.anHourLater()
                return e
            },
            run: { f in
                f.live.1.psi_some_avg10_centi = 5500
                RunBytes.sealLive(&f.live.1)
            },
            expected: "memory/inferred"),
        Case(
            name: "exec: this process before it replaced its image (same pid and start time)",
            environment: { s in
                var e = s.environment()
                e.process = (4321, CraftedSystem.startTicks)
                return e
            },
            expected: "nothing"),
        Case(
            name: "same pid, other start time (the pid was reused)",
            environment: { s in
                var e = s.environment()
                e.process = (4321, CraftedSystem.startTicks + 1)
                return e
            },
            expected: "unknown/inferred"),
        Case(
            name: "same start time, other pid",
            environment: { s in
                var e = s.environment()
                e.process = (4322, CraftedSystem.startTicks)
                return e
            },
            expected: "unknown/inferred"),
        Case(
            name: "unfinished hang and vmstat rise", v1: false, v2: false, hangMs: 900,
            after: { try $0.set("proc/vmstat", "oom_kill 9\n") },
            expected: "memory/inferred"),
    ]

    @Test(arguments: cases)
    func judges(_ c: Case) throws {
        let system = try CraftedSystem(v1: c.v1, v2: c.v2)
        var file = system.runFile(foreground: c.foreground, watchdogUsec: c.watchdogUsec)
        c.run(&file)
        let run = try RunFile.decode(RunBytes.of(file))
        try c.after(system)
        let verdict = ExitInference(environment: c.environment(system))
            .judge(run, crashed: c.crashed, unfinishedHangMilliseconds: c.hangMs)
        let got = verdict.report.map { "\($0.reason.rawValue)/\($0.source.rawValue)" } ?? "nothing"
        #expect(got == c.expected, "\(verdict)")
        if let report = verdict.report {
            if report.evidence.contains("vmstat") {
                #expect(report.evidence.contains("of the run's last update"), "\(report.evidence)")
            }
            if report.evidence.contains("pressure") {
                #expect(report.evidence.contains("at the run's last update"), "\(report.evidence)")
            }
            #expect(report.foreground == c.foreground)
            #expect(!report.evidence.isEmpty)
            #expect(ExitReason.allCases.contains(report.reason))
        }
    }

    @Test("The process start time: field 22 of stat, after a comm with spaces and parentheses; 0 when unreadable")
    func processStartTicks() throws {
        let system = try CraftedSystem()
        #expect(aft_process_start_ticks(system.proc) == CraftedSystem.startTicks)
        #expect(system.runFile().info.process_start_ticks == CraftedSystem.startTicks)
        try system.set("proc/self/stat", "4321 (app) S 1 2 3\n")
        #expect(aft_process_start_ticks(system.proc) == 0)
        try system.set("proc/self/stat", "4321 app S 1 4321 4321 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 1 0 77 1\n")
        #expect(aft_process_start_ticks(system.proc) == 0)
        #expect(aft_process_start_ticks(system.root + "/nowhere") == 0)
        #expect(aft_process_start_ticks("/proc") > 0)
    }

    @Test func recordCarriesTheRunsSessionReleaseAndStableUID() throws {
        let system = try CraftedSystem()
        var file = system.runFile()
        let newSession = UUID(), previous = UUID()
        withUnsafeMutableBytes(of: &file.live.1.session_id) { $0.copyBytes(from: newSession.bytes) }
        withUnsafeMutableBytes(of: &file.live.1.previous_session_id) { $0.copyBytes(from: previous.bytes) }
        CString.write("checkout", into: &file.live.1.screen)
        file.live.1.updated_realtime_ns = 1_700_000_123_000_000_000
        RunBytes.sealLive(&file.live.1)
        try system.set("sys/fs/cgroup/memory/app/svc/memory.oom_control", Self.oomV1)
        let run = try RunFile.decode(RunBytes.of(file))
        let report = try #require(ExitInference(environment: system.environment()).judge(run, crashed: false).report)
        let record = report.record(observedTimeUnixNano: 1_800_000_000_000_000_000)
        let again = ExitInference(environment: system.environment()).judge(run, crashed: false).report!.record(
            observedTimeUnixNano: 1)
        #expect(record.eventName == "app.abnormal_exit")
        #expect(record.severityNumber == .fatal)
        #expect(record.timeUnixNano == 1_700_000_123_000_000_000)
        #expect(record[attribute: "apsio.exit.reason"] == "memory")
        #expect(record[attribute: "apsio.exit.source"] == "platform")
        #expect(record[attribute: "apsio.exit.foreground"] == true)
        #expect(
            record[attribute: "apsio.exit.evidence"]?.stringValue?.contains("memory.oom_control oom_kill 0 -> 1")
                == true)
        #expect(record[attribute: "session.id"]?.stringValue == newSession.lowercased)
        #expect(record[attribute: "session.previous_id"]?.stringValue == previous.lowercased)
        #expect(record[attribute: "service.version"] == "1.0")
        #expect(record[attribute: "app.build_id"] == "abcd")
        #expect(record[attribute: "os.version"] == "12")
        #expect(record[attribute: "app.screen.name"] == "checkout")
        let uid = try #require(record[attribute: "log.record.uid"]?.stringValue)
        #expect(ULID.isValid(uid) && uid == again[attribute: "log.record.uid"]?.stringValue)
        #expect(ULID.timeMilliseconds(of: uid) == 1_700_000_123_000)
    }
}
