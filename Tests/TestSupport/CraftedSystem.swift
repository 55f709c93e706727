import AftermathNextLaunch
import CSignalShim
import Foundation

/// A crafted /proc and /sys tree for the run record, v1 and v2 cgroups both present unless
/// told otherwise.
package struct CraftedSystem: Sendable {
    package let root: String
    package var proc: String { root + "/proc" }
    package var sys: String { root + "/sys" }
    package static let bootID = "4d199072-35a5-496a-986f-ece73932a683"
    package static let startTicks: UInt64 = 987_654

    package init(v1: Bool = true, v2: Bool = true, unified: Bool = false) throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("aftermath-sys-\(UUID().uuidString)").path
        var cgroup = "9:name=systemd:/\n"
        if v1 { cgroup += "4:cpu,memory:/app/svc\n" }
        cgroup += "0::/app/svc\n"
        try set("proc/self/cgroup", cgroup)
        try set("proc/self/status", "Name:\tapp\nState:\tS (sleeping)\nTracerPid:\t0\n")
        // starttime (field 22) \(Self.startTicks), after a comm with a space and a parenthesis.
        try set(
            "proc/self/stat",
            "4321 (my) app) S 1 4321 4321 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 1 0 \(Self.startTicks) 1000000 50\n")
        try set("proc/vmstat", "nr_free_pages 100\noom_kill 5\nnr_zone_active_file 3\n")
        try set(
            "proc/pressure/memory",
            "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")
        try set("proc/sys/kernel/random/boot_id", Self.bootID + "\n")
        if v1 {
            for dir in ["app/svc", "app"] {
                try set(
                    "sys/fs/cgroup/memory/\(dir)/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n")
            }
        }
        if v2 {
            let base = unified ? "sys/fs/cgroup/unified" : "sys/fs/cgroup"
            for dir in ["app/svc", "app"] {
                try set("\(base)/\(dir)/memory.events", "low 0\nhigh 0\nmax 3\noom 1\noom_kill 0\noom_group_kill 0\n")
            }
        }
    }

    package func set(_ relative: String, _ text: String) throws {
        let path = root + "/" + relative
        try FileManager.default.createDirectory(
            atPath: (path as NSString).deletingLastPathComponent,
            withIntermediateDirectories: true)
        try text.write(toFile: path, atomically: false, encoding: .utf8)
    }

    /// A run file as aft_run_start writes it, evidence read from this tree.
    package func runFile(
        version: String = "1.0", buildID: [UInt8] = [0xab, 0xcd], foreground: Bool = true,
        watchdogUsec: UInt64 = 0
    ) -> aft_run_file {
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
        proc.withCString { p in
            sys.withCString { s in
                options.proc_root = p
                options.sys_root = s
                _ = aft_run_prepare(&options, &file)
            }
        }
        return file
    }

    /// The environment of a next launch on the same system and release.
    package func environment(version: String = "1.0", buildID: String = "abcd") -> ExitEnvironment {
        ExitEnvironment(
            procRoot: proc, sysRoot: sys, serviceVersion: version, appBuildID: buildID,
            osName: "Debian GNU/Linux", osVersion: "12", kernelRelease: "6.1.0")
    }
}

/// Building and sealing run-file bytes.
package enum RunBytes {
    package static func of(_ file: aft_run_file) -> [UInt8] { withUnsafeBytes(of: file) { Array($0) } }

    package static func sealLive(_ live: inout aft_run_live) {
        live.check = withUnsafeBytes(of: live) {
            aft_run_check($0.baseAddress!, MemoryLayout<aft_run_live>.offset(of: \.check)!)
        }
    }
    package static func sealTerm(_ t: inout aft_run_term) {
        t.check = withUnsafeBytes(of: t) {
            aft_run_check($0.baseAddress!, MemoryLayout<aft_run_term>.offset(of: \.check)!)
        }
    }
    package static func sealExit(_ e: inout aft_run_exit) {
        e.check = withUnsafeBytes(of: e) {
            aft_run_check($0.baseAddress!, MemoryLayout<aft_run_exit>.offset(of: \.check)!)
        }
    }
}
