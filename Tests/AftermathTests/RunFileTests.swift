import CSignalShim
import Foundation
import Testing
import Aftermath
import AftermathNextLaunch
import AftermathOTLP
import AftermathTesting
import AftermathOTLPHTTP
import AftermathSymbolication
import CHarnessFaults

/// A crafted /proc and /sys tree for the run record, v1 and v2 cgroups both present unless
/// told otherwise.
struct CraftedSystem: Sendable {
    let root: String
    var proc: String { root + "/proc" }
    var sys: String { root + "/sys" }
    static let bootID = "4d199072-35a5-496a-986f-ece73932a683"

    init(v1: Bool = true, v2: Bool = true, unified: Bool = false) throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("aftermath-sys-\(UUID().uuidString)").path
        var cgroup = "9:name=systemd:/\n"
        if v1 { cgroup += "4:cpu,memory:/app/svc\n" }
        cgroup += "0::/app/svc\n"
        try set("proc/self/cgroup", cgroup)
        try set("proc/self/status", "Name:\tapp\nState:\tS (sleeping)\nTracerPid:\t0\n")
        try set("proc/vmstat", "nr_free_pages 100\noom_kill 5\nnr_zone_active_file 3\n")
        try set("proc/pressure/memory", "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")
        try set("proc/sys/kernel/random/boot_id", Self.bootID + "\n")
        if v1 {
            for dir in ["app/svc", "app"] {
                try set("sys/fs/cgroup/memory/\(dir)/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n")
            }
        }
        if v2 {
            let base = unified ? "sys/fs/cgroup/unified" : "sys/fs/cgroup"
            for dir in ["app/svc", "app"] {
                try set("\(base)/\(dir)/memory.events", "low 0\nhigh 0\nmax 3\noom 1\noom_kill 0\noom_group_kill 0\n")
            }
        }
    }

    func set(_ relative: String, _ text: String) throws {
        let path = root + "/" + relative
        try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent,
                                                withIntermediateDirectories: true)
        try text.write(toFile: path, atomically: false, encoding: .utf8)
    }

    /// A run file as aft_run_start writes it, evidence read from this tree.
    func runFile(version: String = "1.0", buildID: [UInt8] = [0xab, 0xcd], foreground: Bool = true,
                 watchdogUsec: UInt64 = 0) -> aft_run_file {
        var options = aft_run_options()
        var c = aft_context()
        withUnsafeMutableBytes(of: &c.run_id) { $0.copyBytes(from: UUID().bytes) }
        withUnsafeMutableBytes(of: &c.session_id) { $0.copyBytes(from: UUID().bytes) }
        c.pid = 4321
        c.start_realtime_ns = 1_700_000_000_000_000_000
        CString.write("app", into: &c.service_name)
        CString.write(version, into: &c.service_version)
        CString.write("Debian GNU/Linux", into: &c.os_name)
        CString.write("12", into: &c.os_version)
        CString.write("6.1.0", into: &c.kernel_release)
        withUnsafeMutableBytes(of: &c.app_build_id) { $0.copyBytes(from: buildID) }
        c.app_build_id_size = UInt32(buildID.count)
        options.context = c
        options.foreground = foreground ? 1 : 0
        options.watchdog_usec = watchdogUsec
        var file = aft_run_file()
        proc.withCString { p in sys.withCString { s in
            options.proc_root = p
            options.sys_root = s
            _ = aft_run_prepare(&options, &file)
        } }
        return file
    }

    /// The environment of a next launch on the same system and release.
    func environment(version: String = "1.0", buildID: String = "abcd") -> ExitEnvironment {
        ExitEnvironment(procRoot: proc, sysRoot: sys, serviceVersion: version, appBuildID: buildID,
                        osName: "Debian GNU/Linux", osVersion: "12", kernelRelease: "6.1.0")
    }
}

/// Building and sealing run-file bytes.
enum RunBytes {
    static func of(_ file: aft_run_file) -> [UInt8] { withUnsafeBytes(of: file) { Array($0) } }

    static func sealLive(_ live: inout aft_run_live) {
        live.check = withUnsafeBytes(of: live) { aft_run_check($0.baseAddress!, MemoryLayout<aft_run_live>.offset(of: \.check)!) }
    }
    static func sealTerm(_ t: inout aft_run_term) {
        t.check = withUnsafeBytes(of: t) { aft_run_check($0.baseAddress!, MemoryLayout<aft_run_term>.offset(of: \.check)!) }
    }
    static func sealExit(_ e: inout aft_run_exit) {
        e.check = withUnsafeBytes(of: e) { aft_run_check($0.baseAddress!, MemoryLayout<aft_run_exit>.offset(of: \.check)!) }
    }
}

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
        #expect(decoded.cgroupDirectories == [system.sys + "/fs/cgroup/memory/app/svc", system.sys + "/fs/cgroup/memory/app",
                                              system.sys + "/fs/cgroup/app/svc", system.sys + "/fs/cgroup/app"])
        #expect(decoded.info.vmstat_oom_kill_at_start == 5)
        let live = try #require(decoded.live)
        #expect(live.sequence == 1)
        #expect(live.vmstat_oom_kill == 5)
        #expect(live.psi_some_avg10_centi == 0)
        #expect(decoded.foreground)
        #expect(!decoded.debuggerSeen)
        #expect(decoded.term == nil && decoded.exit == nil)
        #expect(decoded.sessionID == decoded.context.sessionID)
    }

    @Test func findsV2UnderUnifiedAndV1Alone() throws {
        let hybrid = try CraftedSystem(v1: true, v2: true, unified: true)
        let dirs = try RunFile.decode(RunBytes.of(hybrid.runFile())).cgroupDirectories
        #expect(dirs[2] == hybrid.sys + "/fs/cgroup/unified/app/svc")
        let v1Only = try CraftedSystem(v1: true, v2: false)
        let v1Dirs = try RunFile.decode(RunBytes.of(v1Only.runFile())).cgroupDirectories
        #expect(v1Dirs[0] == v1Only.sys + "/fs/cgroup/memory/app/svc" && v1Dirs[2] == "" && v1Dirs[3] == "")
        let v2Only = try CraftedSystem(v1: false, v2: true)
        let v2Dirs = try RunFile.decode(RunBytes.of(v2Only.runFile())).cgroupDirectories
        #expect(v2Dirs[0] == "" && v2Dirs[2] == v2Only.sys + "/fs/cgroup/app/svc")
    }

    @Test func readsTracerAndPressure() throws {
        let system = try CraftedSystem()
        try system.set("proc/self/status", "Name:\tapp\nTracerPid:\t4242\n")
        try system.set("proc/pressure/memory", "some avg10=45.31 avg60=2.00 avg300=0.00 total=9\nfull avg10=7.5 avg60=0.00 avg300=0.00 total=1\n")
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
        file.live.0.updated_realtime_ns += 1 // torn: the check no longer holds
        #expect(try RunFile.decode(RunBytes.of(file)).live?.sequence == 1)
        file.live.1.foreground ^= 1
        let none = try RunFile.decode(RunBytes.of(file))
        #expect(none.live == nil)
        #expect(none.lastSeenUnixNano == 1_700_000_000_000_000_000) // the start time
    }

    @Test func truncatedFilesThrowOrKeepWhatIsWhole() throws {
        let bytes = RunBytes.of(try CraftedSystem().runFile())
        for cut in [0, 10, 63, 64, 65, 1000, 2303] {
            #expect(throws: ReportFileError.self) { try RunFile.decode(Array(bytes.prefix(cut))) }
        }
        let infoOnly = try RunFile.decode(Array(bytes.prefix(2304)))
        #expect(infoOnly.live == nil && infoOnly.exit == nil)
        let cutInSecondSlot = try RunFile.decode(Array(bytes.prefix(2304 + 336 + 100)))
        #expect(cutInSecondSlot.live == nil) // slot 1 holds the only update and is cut
        let noExitBlock = try RunFile.decode(Array(bytes.prefix(3050)))
        #expect(noExitBlock.live?.sequence == 1 && noExitBlock.exit == nil)
    }

    @Test func hostileFilesThrow() throws {
        let bytes = RunBytes.of(try CraftedSystem().runFile())
        var flipped = bytes
        flipped[64 + 500] ^= 0xFF
        #expect(throws: ReportFileError.checksumMismatch(expected: TestSupport.u32(bytes, 24),
                                                          actual: flipped.withUnsafeBytes { aft_crc32(0, $0.baseAddress! + 64, 2240) })) {
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
        #expect(throws: ReportFileError.tooLarge(bytes: 70_000)) { try RunFile.decode(bytes + [UInt8](repeating: 0, count: 70_000 - bytes.count)) }
        var rng = SystemRandomNumberGenerator()
        for _ in 0..<200 {
            var junk = bytes
            for _ in 0..<8 { junk[Int.random(in: 0..<junk.count, using: &rng)] = UInt8.random(in: 0...255, using: &rng) }
            _ = try? RunFile.decode(junk) // never traps
        }
    }

    @Test func blocksCountOnlyWithTheirCheck() throws {
        var file = try CraftedSystem().runFile()
        file.term.signal = SIGTERM
        file.term.sender_pid = 1
        file.term.disposition = AFT_TERM_DEFAULT
        file.exit.clean = AFT_RUN_CLEAN_MARKER
        #expect(try RunFile.decode(RunBytes.of(file)).term == nil) // not sealed
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
}
