import Aftermath
import AftermathNextLaunch
import AftermathOTLP
import AftermathTesting
import CSignalShim
import CHarnessFaults
import TestSupport
import Foundation
import Testing

@Suite("Run file")
struct RunFileTests {
    @Test func layoutMatchesTheCHeader() {
        #expect(MemoryLayout<aft_run_info>.size == 2240)
        #expect(MemoryLayout<aft_run_live>.size == 336)
        #expect(MemoryLayout<aft_run_term>.size == 64)
        #expect(MemoryLayout<aft_run_exit>.size == 40)
        #expect(MemoryLayout<aft_run_file>.size == 3080)
        #expect(MemoryLayout<aft_run_file>.offset(of: \.live) == 2304)
        #expect(MemoryLayout<aft_error_info>.size == 232)
    }

    @Test func roundTripsWhatStartWrites() throws {
        let system = try CraftedSystem()
        let decoded = try RunFile.decode(RunBytes.of(system.runFile(watchdogUsec: 30_000_000)))
        #expect(decoded.context.serviceVersion == "1.0")
        #expect(decoded.context.appBuildID == "abcd")
        #expect(decoded.context.pid == 4321)
        #expect(decoded.bootID == CraftedSystem.bootID)
        #expect(decoded.info.watchdog_usec == 30_000_000)
        // Memory on v1: the unified hierarchy holds no counters of it, and is not looked in.
        #expect(
            decoded.cgroupDirectories == [
                system.sys + "/fs/cgroup/memory/app/svc", system.sys + "/fs/cgroup/memory/app", "", "",
            ])
        // The own cgroup's counter was read: /proc/vmstat's host-wide one is not.
        #expect(decoded.info.oom_at_start.0 == 0)
        #expect(decoded.info.vmstat_oom_kill_at_start == AFT_RUN_UNREAD)
        let live = try #require(decoded.live)
        #expect(live.sequence == 1)
        #expect(live.vmstat_oom_kill == AFT_RUN_UNREAD)
        #expect(live.psi_some_avg10_centi == 0)
        #expect(decoded.foreground)
        #expect(!decoded.debuggerSeen)
        #expect(decoded.term == nil && decoded.exit == nil)
        #expect(decoded.sessionID == decoded.context.sessionID)
    }

    @Test("/proc/vmstat's oom_kill is read, at start and in later samples, only where the own cgroup's counter is not")
    func vmstatOnlyWithoutOwnCgroupCounter() throws {
        func vmstat(_ system: CraftedSystem) throws -> (start: UInt64, firstLive: UInt64, sample: UInt64) {
            let file = system.runFile()
            let live = try #require(try RunFile.decode(RunBytes.of(file)).live)
            var info = file.info
            var sample = aft_run_live()
            aft_run_sample(system.proc, &info, &sample)
            return (file.info.vmstat_oom_kill_at_start, live.vmstat_oom_kill, sample.vmstat_oom_kill)
        }
        let unread = AFT_RUN_UNREAD
        // No memory cgroup at all: the host's count is the only evidence.
        #expect(try vmstat(CraftedSystem(v1: false, v2: false)) == (5, 5, 5))
        // v2: the own memory.events holds the count; vmstat is left alone.
        let v2 = try CraftedSystem(v1: false, v2: true)
        #expect(try vmstat(v2) == (unread, unread, unread))
        // A kernel before per-cgroup OOM counts (no oom_kill line), the parent's still readable:
        // only the own cgroup's counts every kill of the run's processes.
        let old = try CraftedSystem(v1: true, v2: false)
        try old.set("sys/fs/cgroup/memory/app/svc/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\n")
        #expect(try vmstat(old) == (5, 5, 5))
        // The own cgroup gone after start (a later sample reads the host's count again).
        let started = v2.runFile()
        try FileManager.default.removeItem(atPath: v2.sys + "/fs/cgroup/app/svc")
        var info = started.info
        var sample = aft_run_live()
        aft_run_sample(v2.proc, &info, &sample)
        #expect(started.info.vmstat_oom_kill_at_start == unread)
        #expect(sample.oom.2 == unread && sample.vmstat_oom_kill == 5)
    }

    @Test func findsV2UnderUnifiedAndV1Alone() throws {
        let unified = try CraftedSystem(v1: false, v2: true, unified: true)
        let dirs = try RunFile.decode(RunBytes.of(unified.runFile())).cgroupDirectories
        #expect(dirs[2] == unified.sys + "/fs/cgroup/unified/app/svc")
        #expect(dirs[3] == unified.sys + "/fs/cgroup/unified/app")
        let v1Only = try CraftedSystem(v1: true, v2: false)
        let v1Dirs = try RunFile.decode(RunBytes.of(v1Only.runFile())).cgroupDirectories
        #expect(v1Dirs[0] == v1Only.sys + "/fs/cgroup/memory/app/svc" && v1Dirs[2] == "" && v1Dirs[3] == "")
        let v2Only = try CraftedSystem(v1: false, v2: true)
        let v2Dirs = try RunFile.decode(RunBytes.of(v2Only.runFile())).cgroupDirectories
        #expect(v2Dirs[0] == "" && v2Dirs[2] == v2Only.sys + "/fs/cgroup/app/svc")
    }

    /// The cgroup directories aft_find_cgroup_dirs finds in system's tree (sys: its /sys).
    static func cgroupDirs(_ system: CraftedSystem, sys: String? = nil) -> [String] {
        var info = aft_run_info()
        aft_find_cgroup_dirs(system.proc, sys ?? system.sys, &info.cgroup_dirs.0)
        return withUnsafeBytes(of: &info.cgroup_dirs) { raw in
            (0..<Int(AFT_CGROUP_DIRS)).map { i in
                let slot = raw[(i * Int(AFT_PATH_CAPACITY))..<((i + 1) * Int(AFT_PATH_CAPACITY))]
                return String(decoding: slot.prefix { $0 != 0 }, as: UTF8.self)
            }
        }
    }

    @Test("A cgroup directory is recorded where its counter file opens as a regular file, read as it is probed")
    func cgroupProbeIsTheRead() throws {
        let system = try CraftedSystem(v1: true, v2: false)
        try system.set("sys/fs/cgroup/memory/app/svc/memory.oom_control", "oom_kill_disable 0\noom_kill 7\n")
        try system.set("sys/fs/cgroup/memory/app/memory.oom_control", "oom_kill 9\n")
        let file = system.runFile()
        #expect(file.info.oom_at_start.0 == 7 && file.info.oom_at_start.1 == 9)
        // A FIFO in a counter's place: never opened for reading (it could block), not recorded.
        let parent = system.sys + "/fs/cgroup/memory/app/memory.oom_control"
        try FileManager.default.removeItem(atPath: parent)
        #expect(mkfifo(parent, 0o600) == 0)
        #expect(Self.cgroupDirs(system) == [system.sys + "/fs/cgroup/memory/app/svc", "", "", ""])
        let again = system.runFile()
        #expect(again.info.oom_at_start.0 == 7 && again.info.oom_at_start.1 == AFT_RUN_UNREAD)
        // v2: a FIFO under the unified mount, the counters under the base one: the base is used.
        let v2 = try CraftedSystem(v1: false, v2: true)
        try v2.set("sys/fs/cgroup/app/svc/memory.events", "oom_kill 3\noom_group_kill 1\n")
        try FileManager.default.createDirectory(
            atPath: v2.sys + "/fs/cgroup/unified/app/svc", withIntermediateDirectories: true)
        #expect(mkfifo(v2.sys + "/fs/cgroup/unified/app/svc/memory.events", 0o600) == 0)
        #expect(Self.cgroupDirs(v2)[2] == v2.sys + "/fs/cgroup/app/svc")
        let v2File = v2.runFile()
        #expect(v2File.info.oom_at_start.2 == 3 && v2File.info.oom_at_start.3 == 1)
    }

    @Test("Memory on v1 (a hybrid system): no memory.events looked for in the unified hierarchy, even where one is")
    func hybridLooksOnlyInV1() throws {
        let system = try CraftedSystem(v1: true, v2: true, unified: true)
        let v1 = [system.sys + "/fs/cgroup/memory/app/svc", system.sys + "/fs/cgroup/memory/app"]
        #expect(Self.cgroupDirs(system) == v1 + ["", ""])
        // The v1 line after the unified one: the same.
        try system.set("proc/self/cgroup", "0::/app/svc\n4:cpu,memory:/app/svc\n")
        #expect(Self.cgroupDirs(system) == v1 + ["", ""])
        // No v1 line with memory (a hybrid system whose memory controller is on v2): unified.
        try system.set("proc/self/cgroup", "4:cpu:/app/svc\n0::/app/svc\n")
        #expect(
            Self.cgroupDirs(system) == [
                "", "", system.sys + "/fs/cgroup/unified/app/svc", system.sys + "/fs/cgroup/unified/app",
            ])
    }

    @Test("A cgroup path or a system root too long for a directory's capacity finds none there, and the rest as before")
    func cgroupPathsTooLongAreSkipped() throws {
        let v1 = try CraftedSystem(v1: true, v2: false)
        let v2 = try CraftedSystem(v1: false, v2: true)
        #expect(
            Self.cgroupDirs(v1) == [v1.sys + "/fs/cgroup/memory/app/svc", v1.sys + "/fs/cgroup/memory/app", "", ""])
        #expect(Self.cgroupDirs(v2) == ["", "", v2.sys + "/fs/cgroup/app/svc", v2.sys + "/fs/cgroup/app"])
        // A root whose cgroup bases do not fit: nothing, and nothing probed outside it.
        let longRoot = "/" + String(repeating: "r", count: Int(AFT_PATH_CAPACITY))
        #expect(Self.cgroupDirs(v1, sys: v1.sys + longRoot) == ["", "", "", ""])
        #expect(Self.cgroupDirs(v2, sys: v2.sys + longRoot) == ["", "", "", ""])
        // The process's own cgroup too long for a directory: only its parent's are found.
        let long = "app/" + String(repeating: "s", count: Int(AFT_PATH_CAPACITY))
        try v1.set("proc/self/cgroup", "4:memory:/\(long)\n0::/\(long)\n")
        #expect(Self.cgroupDirs(v1) == ["", v1.sys + "/fs/cgroup/memory/app", "", ""])
        try v2.set("proc/self/cgroup", "0::/\(long)\n")
        #expect(Self.cgroupDirs(v2) == ["", "", "", v2.sys + "/fs/cgroup/app"])
    }

    @Test("v2 memory.events: both OOM counters from one read, in either order; one that is missing is unread")
    func readsBothV2CountersOnce() throws {
        let system = try CraftedSystem(v1: false, v2: true)
        try system.set("sys/fs/cgroup/app/svc/memory.events", "oom_group_kill 4\nlow 0\noom 2\noom_kill 7\n")
        try system.set("sys/fs/cgroup/app/memory.events", "low 0\noom_killer 9\noom_kill 3")
        let run = try RunFile.decode(RunBytes.of(system.runFile()))
        let start = withUnsafeBytes(of: run.info.oom_at_start) { Array($0.bindMemory(to: UInt64.self)) }
        #expect(start[Int(AFT_OOM_V2_SELF)] == 7 && start[Int(AFT_OOM_V2_SELF_GROUP)] == 4)
        #expect(start[Int(AFT_OOM_V2_PARENT)] == 3 && start[Int(AFT_OOM_V2_PARENT_GROUP)] == AFT_RUN_UNREAD)
    }

    @Test func readsTracerAndPressure() throws {
        let system = try CraftedSystem()
        try system.set("proc/self/status", "Name:\tapp\nTracerPid:\t4242\n")
        try system.set(
            "proc/pressure/memory",
            "some avg10=45.31 avg60=2.00 avg300=0.00 total=9\nfull avg10=7.5 avg60=0.00 avg300=0.00 total=1\n")
        let run = try RunFile.decode(RunBytes.of(system.runFile()))
        #expect(run.debuggerSeen)
        #expect(run.live?.tracer_pid == 4242)
        #expect(run.live?.psi_some_avg10_centi == 4531)
        #expect(run.live?.psi_full_avg10_centi == 750)
    }

    @Test func newestValidSlotWinsAndATornSlotIsIgnored() throws {
        let system = try CraftedSystem()
        var file = system.runFile()
        var newer = file.live.1
        newer.sequence = 2
        newer.updated_realtime_ns = 1_800_000_000_000_000_000
        RunBytes.sealLive(&newer)
        file.live.0 = newer
        #expect(try RunFile.decode(RunBytes.of(file)).live?.sequence == 2)
        #expect(try RunFile.decode(RunBytes.of(file)).lastSeenUnixNano == 1_800_000_000_000_000_000)
        file.live.0.updated_realtime_ns += 1  // torn: the check no longer holds
        #expect(try RunFile.decode(RunBytes.of(file)).live?.sequence == 1)
        file.live.1.foreground ^= 1
        let none = try RunFile.decode(RunBytes.of(file))
        #expect(none.live == nil)
        #expect(none.lastSeenUnixNano == 1_700_000_000_000_000_000)  // the start time
    }

    @Test func truncatedFilesThrowOrKeepWhatIsWhole() throws {
        let bytes = RunBytes.of(try CraftedSystem().runFile())
        for cut in [0, 10, 63, 64, 65, 1000, 2303] {
            #expect(throws: ReportFileError.self) { try RunFile.decode(Array(bytes.prefix(cut))) }
        }
        let infoOnly = try RunFile.decode(Array(bytes.prefix(2304)))
        #expect(infoOnly.live == nil && infoOnly.exit == nil)
        let cutInSecondSlot = try RunFile.decode(Array(bytes.prefix(2304 + 336 + 100)))
        #expect(cutInSecondSlot.live == nil)  // slot 1 holds the only update and is cut
        let noExitBlock = try RunFile.decode(Array(bytes.prefix(3050)))
        #expect(noExitBlock.live?.sequence == 1 && noExitBlock.exit == nil)
    }

    @Test func hostileFilesThrow() throws {
        let bytes = RunBytes.of(try CraftedSystem().runFile())
        var flipped = bytes
        flipped[64 + 500] ^= 0xFF
        #expect(
            throws: ReportFileError.checksumMismatch(
                expected: TestSupport.u32(bytes, 24),
                actual: flipped.withUnsafeBytes { aft_crc32(0, $0.baseAddress! + 64, 2240) })
        ) {
            try RunFile.decode(flipped)
        }
        var kind = bytes
        TestSupport.setU32(&kind, 8, AFT_KIND_CRASH)
        #expect(throws: ReportFileError.unexpectedKind(AFT_KIND_CRASH)) { try RunFile.decode(kind) }
        var uncommitted = bytes
        TestSupport.setU32(&uncommitted, 28, 0)
        #expect(throws: ReportFileError.notCommitted) { try RunFile.decode(uncommitted) }
        var version = bytes
        version[4] = 99
        #expect(throws: ReportFileError.unsupportedVersion(99)) { try RunFile.decode(version) }
        var size = bytes
        TestSupport.setU32(&size, 16, 1 << 30)
        #expect(throws: ReportFileError.self) { try RunFile.decode(size) }
        #expect(throws: ReportFileError.tooLarge(bytes: 70_000)) {
            try RunFile.decode(bytes + [UInt8](repeating: 0, count: 70_000 - bytes.count))
        }
        var rng = SystemRandomNumberGenerator()
        for _ in 0..<200 {
            var junk = bytes
            for _ in 0..<8 {
                junk[Int.random(in: 0..<junk.count, using: &rng)] = UInt8.random(in: 0...255, using: &rng)
            }
            _ = try? RunFile.decode(junk)  // never traps
        }
    }

    @Test func blocksCountOnlyWithTheirCheck() throws {
        var file = try CraftedSystem().runFile()
        file.term.signal = SIGTERM
        file.term.sender_pid = 1
        file.term.disposition = AFT_TERM_DEFAULT
        file.exit.clean = AFT_RUN_CLEAN_MARKER
        #expect(try RunFile.decode(RunBytes.of(file)).term == nil)  // not sealed
        #expect(try RunFile.decode(RunBytes.of(file)).exit == nil)
        RunBytes.sealTerm(&file.term)
        RunBytes.sealExit(&file.exit)
        let run = try RunFile.decode(RunBytes.of(file))
        #expect(run.term?.signal == SIGTERM && run.exit != nil)
    }

    @Test func parsersRejectHostileNumbers() throws {
        let system = try CraftedSystem()
        try system.set("proc/vmstat", "oom_kill 99999999999999999999999\n")
        #expect(aft_read_counter(system.proc + "/vmstat", "oom_kill") == AFT_RUN_UNREAD)
        try system.set("proc/vmstat", "oom_killer 3\noom_kill\t7\n")
        #expect(aft_read_counter(system.proc + "/vmstat", "oom_kill") == 7)
        try system.set("proc/pressure/memory", "some avg10=900.00\n")
        #expect(aft_read_psi_avg10(system.proc + "/pressure/memory", "some") == UInt32.max)
        #expect(aft_read_counter(system.proc + "/missing", "x") == AFT_RUN_UNREAD)
    }

    @Test("A counter is found anywhere in a long file, read in pieces: after a line longer than the piece, last")
    func countersInLongFiles() throws {
        let system = try CraftedSystem()
        // /proc/vmstat's shape: some 170 lines, oom_kill near the end.
        let filler = (0..<200).map { "nr_counter_\($0) \($0 * 1000)\n" }.joined()
        try system.set("proc/vmstat", filler + "oom_kill 42\nnr_after 1\n")
        #expect(aft_read_counter(system.proc + "/vmstat", "oom_kill") == 42)
        try system.set("proc/vmstat", "x_" + String(repeating: "y", count: 3000) + " 5\noom_kill 8")
        #expect(aft_read_counter(system.proc + "/vmstat", "oom_kill") == 8)  // no final newline
        try system.set("proc/vmstat", "oom_kill" + String(repeating: "9", count: 1500) + " 1\n")
        #expect(aft_read_counter(system.proc + "/vmstat", "oom_kill") == AFT_RUN_UNREAD)
        try system.set("proc/vmstat", filler)
        #expect(aft_read_counter(system.proc + "/vmstat", "oom_kill") == AFT_RUN_UNREAD)
    }

    @Test("The delivery judges with the boot id and start ticks the run recorded at start, not read again")
    func deliveryUsesTheStartsReadings() async throws {
        let directory = TestSupport.childDirectory("started-with")
        let system = try CraftedSystem()
        await #expect(processExitsWith: .success) {
            [directory = directory as String, proc = system.proc as String, sys = system.sys as String] in
            var config = Aftermath.Configuration(
                serviceName: "started", serviceVersion: "1", exporter: InMemoryExporter(),
                reportsDirectory: directory, deliverPendingReportsSynchronously: true)
            config.procRoot = proc
            config.sysRoot = sys
            do { try Aftermath.start(config) } catch { exit(2) }
            // The files change after start: what the run recorded is what this process was.
            try? "00000000-0000-0000-0000-000000000000\n".write(
                toFile: proc + "/sys/kernel/random/boot_id", atomically: false, encoding: .utf8)
            try? "4321 (x) S 1 4321 4321 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 1 0 5 1000000 50\n".write(
                toFile: proc + "/self/stat", atomically: false, encoding: .utf8)
            guard let context = Aftermath.currentContext else { exit(3) }
            let collector = Aftermath.collector(
                config, directory: ReportDirectory(root: directory), context: context)
            guard let environment = collector.environment else { exit(4) }
            guard environment.bootID == CraftedSystem.bootID else { exit(5) }
            guard environment.process?.startTicks == CraftedSystem.startTicks else { exit(6) }
            guard environment.process?.pid == Int64(getpid()) else { exit(7) }
            exit(0)
        }
        try? FileManager.default.removeItem(atPath: directory)
        try? FileManager.default.removeItem(atPath: system.root)
    }
}
