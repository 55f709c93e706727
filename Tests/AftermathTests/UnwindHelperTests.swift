import Aftermath
import AftermathTesting
import CHarnessFaults
import CSignalShim
import Foundation
import Testing

/// The stack of a stuck or crashed thread is libunwind's, taken by a helper process that
/// shares the app's memory and is killed at its deadline. Killed while it waited for the
/// loader's lock, it may have held one of libunwind's own locks, which then stays held.
@Suite("Unwinding helper")
struct UnwindHelperTests {
    struct Spilled: Error {}

    /// The child: a busy hang while another thread holds the loader's lock (the capture's
    /// helper times out), then, the lock released, a handled error: it must be written, with
    /// its stack, instead of waiting for good on a lock the killed helper left held.
    static func handledErrorAfterAKilledHelper() -> Int32 {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent(
            "aftermath-unwind-\(UUID().uuidString)"
        ).path
        var config = Aftermath.Configuration(
            serviceName: "unwind-test", serviceVersion: "1.0", exporter: InMemoryExporter(),
            reportsDirectory: root, deliverPendingReportsSynchronously: true)
        config.hangHeartbeat = .manual
        do { try Aftermath.start(config) } catch { return 10 }
        aft_install_complete()
        for _ in 0..<30 {
            Aftermath.heartbeat()
            usleep(10_000)
        }
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

    #if compiler(>=6.2)  // exit tests (#expect(processExitsWith:)) need Swift 6.2
    @Test("A helper killed at its deadline leaves libunwind alone: a later handled error is still written")
    func handledErrorAfterKilledHelper() async {
        await #expect(processExitsWith: .success) {
            exit(UnwindHelperTests.handledErrorAfterAKilledHelper())
        }
    }
    #endif
}
