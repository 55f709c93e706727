import Aftermath
import AftermathTesting
import CHarnessFaults
import CSignalShim
import Foundation
import Testing
import TestSupport

/// An unwinding helper shares the app's memory; one killed at its deadline while it held the
/// loader's lock (inside dl_iterate_phdr) left that lock held for good, and the app's next
/// dlopen, C++ throw or backtrace waited forever. libunwind now finds every loaded image's
/// unwind table without that lock.
@Suite("The loader's lock and the unwinding helpers")
struct LoaderLockTests {
    #if compiler(>=6.2)  // exit tests (#expect(processExitsWith:)) need Swift 6.2
    /// What one child did: 0 its helper finished, 1 it was killed at its deadline, 42 another
    /// thread could not get through dl_iterate_phdr afterwards.
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
            exit(status == AFT_UNWIND_STATUS_TIMED_OUT ? 21 : 20)
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
                if next < 400 {
                    let i = next
                    next += 1
                    group.addTask { await Self.attempt(i) }
                }
            }
        }
        let killed = codes.filter { $0 == 21 }.count
        let deadlocked = codes.filter { $0 == 42 }.count
        #expect(deadlocked == 0, "\(deadlocked) of \(killed) killed helpers left the loader's lock held")
        #expect(killed >= 20, "only \(killed) helpers were killed: the test proves little")
        #expect(codes.allSatisfy { $0 == 20 || $0 == 21 || $0 == 42 }, "\(Set(codes.map { $0 ?? -1 }))")
    }
    #endif

    @Test("Every loaded image's unwind table is registered with libunwind once it is loaded")
    func tablesRegistered() {
        #expect(aft_libunwind_preload() != 0)
        // At least the test binary's, libswiftCore's and libc's executable segments.
        #expect(aft_test_unwind_tables() >= 3, "\(aft_test_unwind_tables())")
    }

    #if compiler(>=6.2)  // exit tests (#expect(processExitsWith:)) need Swift 6.2
    @Test("A library loaded later gets its table at the next refresh; one unloaded loses it")
    func tablesFollowTheLoader() async {
        await #expect(processExitsWith: .success) {
            guard aft_libunwind_preload() != 0 else { exit(10) }
            let before = aft_test_unwind_tables()
            _ = aft_test_unwind_tables_refresh()
            // A library of the system not loaded yet, and a function of it.
            let candidates = [
                ("libexpat.so.1", "XML_ExpatVersion"), ("libbz2.so.1.0", "BZ2_bzlibVersion"),
                ("libffi.so.8", "ffi_call"), ("liblz4.so.1", "LZ4_versionNumber"),
                ("libzstd.so.1", "ZSTD_versionNumber"),
            ]
            guard let (name, symbol) = candidates.first(where: { dlopen($0.0, RTLD_NOW | RTLD_NOLOAD) == nil }),
                let handle = dlopen(name, RTLD_NOW | RTLD_LOCAL), let function = dlsym(handle, symbol)
            else { exit(12) }
            let address = UInt64(UInt(bitPattern: function))
            guard aft_test_unwind_tables_cover(address) == 0 else { exit(13) }
            guard aft_test_unwind_tables_refresh() == 1, aft_test_unwind_tables_cover(address) == 1,
                aft_test_unwind_tables() > before
            else { exit(14) }
            guard aft_test_unwind_tables_refresh() == 0 else { exit(15) }  // nothing changed since
            dlclose(handle)
            guard aft_test_unwind_tables_refresh() == 1, aft_test_unwind_tables_cover(address) == 0 else { exit(16) }
            exit(0)
        }
    }
    #endif
}
