import Aftermath
import AftermathTesting
import CHarnessFaults
import CSignalShim
import Foundation
import Testing
import TestSupport

/// An unwinding helper shares the app's memory; one killed by SIGKILL at its deadline while it
/// held the loader's lock (inside dl_iterate_phdr) left that lock held for good, and the app's
/// next dlopen, C++ throw or backtrace waited forever. Its deadline now ends it by a signal
/// that libunwind blocks around that call and its own locks; SIGKILL only a grace later.
@Suite("The loader's lock and the unwinding helpers")
struct LoaderLockTests {
    #if compiler(>=6.2)  // exit tests (#expect(processExitsWith:)) need Swift 6.2
    /// What one child did: 20 its helper finished, 21 its deadline's SIGALRM ended it, 23 SIGKILL
    /// did after the grace, 42 another thread could not get through dl_iterate_phdr afterwards.
    static func attempt(_ i: Int) async -> Int32? {
        let directory: String = TestSupport.childDirectory("loader-lock-\(i)")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let result = await #expect(processExitsWith: .failure) { [directory = directory as String, i] in
            var config = Aftermath.Configuration(
                serviceName: "loader-lock", serviceVersion: "1", exporter: InMemoryExporter(),
                reportsDirectory: directory, deliverPendingReportsSynchronously: true)
            config.hangHeartbeat = .off
            do { try Aftermath.start(config) } catch { exit(10) }
            guard aft_libunwind_preload() != 0 else { exit(11) }
            _ = aft_test_unwind_briefly(1_000_000_000)  // warm: later budgets are kept as asked
            // Budgets from 5 to 100 µs: the helper is killed in about one child in five.
            let status = aft_test_unwind_briefly(UInt64(5_000 + (i % 40) * 2_500))
            if aft_test_loader_lock_free(2_000) != 1 { exit(42) }
            guard status == AFT_UNWIND_STATUS_TIMED_OUT else { exit(20) }
            // How the helper ended: its waitpid status's signal (23: SIGKILL after the grace).
            exit(aft_test_last_unwinding_helper_status() & 0x7f == SIGKILL ? 23 : 21)
        }
        guard case .exitCode(let code) = result?.exitStatus else { return nil }
        return code
    }

    @Test("Helpers killed at their deadline (hundreds of children) never leave the loader's lock held")
    func killedHelpersLeaveTheLockFree() async {
        var codes: [Int32?] = []
        await withTaskGroup(of: Int32?.self) { group in
            var next = 0
            for _ in 0..<8 {
                let i = next
                next += 1
                group.addTask { await Self.attempt(i) }
            }
            while let code = await group.next() {
                codes.append(code)
                if next < 300 {
                    let i = next
                    next += 1
                    group.addTask { await Self.attempt(i) }
                }
            }
        }
        let killed = codes.filter { $0 == 21 || $0 == 23 }.count
        let deadlocked = codes.filter { $0 == 42 }.count
        #expect(deadlocked == 0, "\(deadlocked) of \(killed) killed helpers left the loader's lock held")
        #expect(killed >= 20, "only \(killed) helpers were killed: the test proves little")
        #expect(codes.allSatisfy { [20, 21, 23, 42].contains($0) }, "\(Set(codes.map { $0 ?? -1 }))")
        // A deadline that finds the helper outside libunwind's masked sections ends it cleanly.
        #expect(
            codes.filter { $0 == 23 }.count * 2 <= killed, "most ends took SIGKILL: \(codes.filter { $0 == 23 }.count)")
    }
    #endif
}
