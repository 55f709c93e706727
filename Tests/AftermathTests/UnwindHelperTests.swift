import Aftermath
import AftermathTesting
import CHarnessFaults
import CSignalShim
import Foundation
import Testing
import TestSupport

/// The stack of a stuck or crashed thread is libunwind's, taken by a helper process that
/// shares the app's memory and is killed at its deadline. Killed while it waited for the
/// loader's lock, it may have held one of libunwind's own locks, which then stays held.
@Suite("Unwinding helper")
struct UnwindHelperTests {
    struct Spilled: Error {}

    /// The child: a busy hang while another thread holds the loader's lock (the capture's
    /// helper times out), then, the lock released, a handled error: it must be written, with
    /// its stack, instead of waiting for good on a lock the killed helper left held.
    /// Starts Aftermath with manual heartbeats over a new directory, lets start's background work
    /// finish and beats for 300 ms; the directory, or nil when start failed.
    static func startBeating(_ tag: String) -> String? {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent(
            "aftermath-\(tag)-\(UUID().uuidString)"
        ).path
        var config = Aftermath.Configuration(
            serviceName: "unwind-test", serviceVersion: "1.0", exporter: InMemoryExporter(),
            reportsDirectory: root, deliverPendingReportsSynchronously: true)
        config.hangHeartbeat = .manual
        do { try Aftermath.start(config) } catch { return nil }
        aft_install_complete()
        for _ in 0..<30 {
            Aftermath.heartbeat()
            usleep(10_000)
        }
        return root
    }

    static func handledErrorAfterAKilledHelper() -> Int32 {
        guard let root = startBeating("unwind") else { return 10 }
        guard aft_test_hold_loader_lock_for(900) == 0 else { return 11 }
        // Busy for 700 ms without a heartbeat: the watchdog captures the stack by a signal
        // after 250 ms, and its helper waits on the loader's lock until killed.
        let end = DispatchTime.now().uptimeNanoseconds + 700_000_000
        var spins = 0
        while DispatchTime.now().uptimeNanoseconds < end { spins &+= 1 }
        usleep(400_000)  // the loader's lock is free again
        alarm(10)  // a wait for good ends the child by SIGALRM, and the test fails
        let written = Aftermath.record(error: Spilled())
        alarm(0)
        guard written else { return 12 }
        let errors = (try? FileManager.default.contentsOfDirectory(atPath: root + "/errors")) ?? []
        guard errors.contains(where: { $0.hasSuffix(".error") }) else { return 13 }
        try? FileManager.default.removeItem(atPath: root)
        return spins > 0 ? 0 : 14
    }

    /// The child: a hang captured while every unwinding helper faults at once. The helper must end
    /// by its own handler's _exit, not by the signal's default action: on kernels before 5.16
    /// that action's core dump kills every process sharing the helper's memory, the app too.
    static func helperFaultEndsTheHelperAlone() -> Int32 {
        guard let root = startBeating("unwind-fault") else { return 10 }
        defer { try? FileManager.default.removeItem(atPath: root) }
        aft_test_fault_in_unwinding_helper(1)
        let end = DispatchTime.now().uptimeNanoseconds + 700_000_000
        var spins = 0
        while DispatchTime.now().uptimeNanoseconds < end { spins &+= 1 }
        Aftermath.heartbeat()
        aft_test_fault_in_unwinding_helper(0)
        let status = aft_test_last_unwinding_helper_status()
        guard status >= 0 else { return 11 }  // no helper was reaped: none ran
        let exited = status & 0x7f == 0, code = (status >> 8) & 0xff
        guard exited, code == aft_test_unwinding_helper_fault_exit(SIGSEGV) else { return 12 }
        // The hang's file, once its capture (the other threads' too) is written: on a loaded
        // machine a moment after the heartbeat.
        var written = false
        for _ in 0..<200 where !written {
            let hangs = (try? FileManager.default.contentsOfDirectory(atPath: root + "/hangs")) ?? []
            written = hangs.contains(where: { $0.hasSuffix(".hang") })
            if !written { usleep(10_000) }
        }
        guard written else { return 13 }
        return spins > 0 ? 0 : 14
    }

    /// The resident helper's pid (a child process of this one named aftermath.unw), if any.
    static func residentHelper() -> pid_t? {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        for entry in entries {
            guard let pid = pid_t(entry),
                let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
                let close = stat.lastIndex(of: ")")
            else { continue }
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            if fields.count > 1, pid_t(fields[1]) == getpid(), stat.contains("(aftermath.unw)") { return pid }
        }
        return nil
    }

    /// The child: the resident helper, which shares the app's memory for the app's whole life,
    /// runs without new privileges and under a seccomp filter of its own.
    static func residentIsSandboxed() -> Int32 {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent(
            "aftermath-unwind-sandbox-\(UUID().uuidString)"
        ).path
        defer { try? FileManager.default.removeItem(atPath: root) }
        let config = Aftermath.Configuration(
            serviceName: "unwind-test", serviceVersion: "1.0", exporter: InMemoryExporter(),
            reportsDirectory: root, deliverPendingReportsSynchronously: true)
        do { try Aftermath.start(config) } catch { return 10 }
        aft_install_complete()
        aft_unwind_resident_start()  // as after a first hang
        guard let helper = residentHelper() else { return 11 }
        guard let status = try? String(contentsOfFile: "/proc/\(helper)/status", encoding: .utf8) else { return 12 }
        let lines = status.split(separator: "\n").map { $0.replacingOccurrences(of: "\t", with: " ") }
        guard lines.contains("NoNewPrivs: 1") else { return 13 }
        guard lines.contains("Seccomp: 2") else { return 14 }
        return 0
    }

    /// In a child: no resident helper after start, and libunwind not used by start (nor warmed
    /// up); a main-thread hang is still captured (by a helper of its own) and reported; the
    /// resident runs once it is over.
    static func residentAfterFirstHang() -> Int32 {
        let exporter = InMemoryExporter()
        var config = Aftermath.Configuration(
            serviceName: "unwind-test", serviceVersion: "1.0", exporter: exporter,
            reportsDirectory: TestSupport.childDirectory("resident-lazy"), deliverPendingReportsSynchronously: true)
        config.hangHeartbeat = .manual
        config.watchConcurrencyPool = false
        do { try Aftermath.start(config) } catch { return 10 }
        aft_install_complete()
        usleep(200_000)
        guard residentHelper() == nil else { return 11 }  // none for a process that never hung
        guard aft_libunwind_used() == 0 else { return 15 }
        guard !libunwindMapped() else { return 16 }  // not even loaded: no link-time dependency
        for _ in 0..<20 {
            Aftermath.heartbeat()
            usleep(10_000)
        }
        usleep(700_000)  // the hang
        for _ in 0..<20 {
            Aftermath.heartbeat()
            usleep(10_000)
        }
        var hang: LogRecord?
        for _ in 0..<300 where hang == nil {
            usleep(10_000)
            hang = exporter.records.first { $0.eventName == "apsio.hang" }
        }
        guard let hang else { return 12 }
        guard (hang[attribute: "exception.stacktrace"]?.stringValue ?? "").split(separator: "\n").count >= 3 else {
            return 13
        }
        guard libunwindMapped(), aft_libunwind_used() != 0 else { return 17 }  // loaded for the hang
        for _ in 0..<200 where residentHelper() == nil { usleep(10_000) }
        guard let helper = residentHelper() else { return 14 }
        // At the app's priority: a hung thread's capture waits on it.
        return niceness("/proc/\(helper)/stat") == niceness("/proc/self/stat") ? 0 : 18
    }

    /// The nice value of a /proc stat file (its 19th field).
    static func niceness(_ path: String) -> Int? {
        guard let stat = try? String(contentsOfFile: path, encoding: .utf8), let close = stat.lastIndex(of: ")")
        else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        return fields.count > 16 ? Int(fields[16]) : nil
    }

    /// Whether this process has libunwind mapped (loaded at its first use, never linked).
    static func libunwindMapped() -> Bool {
        let maps = (try? String(contentsOfFile: "/proc/self/maps", encoding: .utf8)) ?? ""
        return maps.split(separator: "\n").contains {
            $0.hasSuffix("/libunwind.so.8") || $0.contains("/libunwind.so.8.")
        }
    }

    #if compiler(>=6.2)  // exit tests (#expect(processExitsWith:)) need Swift 6.2
    @Test(
        "No resident unwinding helper nor libunwind loaded until the first hang (captured by libunwind in a helper of its own); then one"
    )
    func residentAfterFirstHangTest() async {
        await #expect(processExitsWith: .success) {
            exit(UnwindHelperTests.residentAfterFirstHang())
        }
    }

    @Test("A fault in an unwinding helper ends it by its own exit, not by the signal: the app lives on")
    func helperFault() async {
        await #expect(processExitsWith: .success) {
            exit(UnwindHelperTests.helperFaultEndsTheHelperAlone())
        }
    }

    @Test("The resident unwinding helper runs with no new privileges, under a seccomp filter")
    func residentSandbox() async {
        await #expect(processExitsWith: .success) {
            exit(UnwindHelperTests.residentIsSandboxed())
        }
    }

    /// The child: after start (its install completed), no helper mapping, and a forked child
    /// none either; after a handled error (libunwind's first user), one shared mapping for the
    /// helpers' answers, which a forked child replaces with its own.
    static func helperMappingsAtFirstUse() -> Int32 {
        guard aft_test_shared_anonymous_mappings() == 0 else { return 9 }
        guard let root = startBeating("unwind-lazy") else { return 10 }
        defer { try? FileManager.default.removeItem(atPath: root) }
        guard aft_test_shared_anonymous_mappings() == 0 else { return 11 }  // none yet
        guard aft_test_fork_helper_buffers() == 0 else { return 12 }
        guard Aftermath.record(error: Spilled()) else { return 13 }
        guard aft_test_shared_anonymous_mappings() == 1 else { return 14 }
        let forked = aft_test_fork_helper_buffers()
        guard forked == 0 else { return Int32(40 + forked) }
        return aft_libunwind_used() == 1 ? 0 : 16
    }

    @Test("The unwinding helpers' mappings are made at their first use, not at start; a forked child never shares them")
    func helperMappingsAtFirstUseTest() async {
        await #expect(processExitsWith: .success) {
            exit(UnwindHelperTests.helperMappingsAtFirstUse())
        }
    }

    @Test("A helper killed at its deadline leaves libunwind alone: a later handled error is still written")
    func handledErrorAfterKilledHelper() async {
        await #expect(processExitsWith: .success) {
            exit(UnwindHelperTests.handledErrorAfterAKilledHelper())
        }
    }
    #endif
}
