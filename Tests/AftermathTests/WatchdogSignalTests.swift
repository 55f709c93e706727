import CHarnessFaults
import CSignalShim
import Foundation
import Testing
import Aftermath
import AftermathTesting
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The signal set-up that lets the hang capture and the Swift runtime's backtracer reach the
/// threads: the capture signal, the watched thread's mask, Aftermath's own threads' masks.
@Suite("Watchdog signals")
struct WatchdogSignalTests {
    /// Starts Aftermath in a child with manual heartbeats; exits 10 when it cannot.
    static func startManual(_ tag: String) {
        var config = Aftermath.Configuration(
            serviceName: "hang-test", serviceVersion: "1", exporter: InMemoryExporter(),
            reportsDirectory: TestSupport.childDirectory(tag),
            deliverPendingReportsSynchronously: true)
        config.hangHeartbeat = .manual
        do { try Aftermath.start(config) } catch { exit(10) }
    }

    /// The SigBlk mask of one of this process's threads.
    static func blockedMask(tid: UInt64) -> UInt64? {
        guard let text = try? String(contentsOfFile: "/proc/self/task/\(tid)/status", encoding: .utf8),
            let line = text.split(separator: "\n").first(where: { $0.hasPrefix("SigBlk:") })
        else { return nil }
        return UInt64(line.dropFirst(7).trimmingCharacters(in: .whitespaces), radix: 16)
    }

    static func blocks(_ mask: UInt64, _ signo: Int32) -> Bool { (mask >> UInt64(signo - 1)) & 1 == 1 }

    #if compiler(>=6.2)  // exit tests (#expect(processExitsWith:)) need Swift 6.2
    @Test(
        "The watchdog thread lets SIGPROF through (the Swift backtracer pauses threads with it), and the capture signal is a free real-time one"
    )
    func watchdogSignals() async {
        await #expect(processExitsWith: .success) {
            WatchdogSignalTests.startManual("hang-signals")
            var stats = aft_watchdog_stats()
            for _ in 0..<100 where stats.watchdog_tid == 0 {
                usleep(10_000)
                aft_watchdog_get_stats(&stats)
            }
            guard let mask = WatchdogSignalTests.blockedMask(tid: stats.watchdog_tid) else { exit(11) }
            // The backtracer tries SIGUSR1, then SIGUSR2, then SIGPROF.
            guard [SIGUSR1, SIGUSR2, SIGPROF].contains(where: { !WatchdogSignalTests.blocks(mask, $0) }) else {
                exit(12)
            }
            // Process-directed signals the app handles stay away from the watchdog.
            guard WatchdogSignalTests.blocks(mask, SIGTERM), WatchdogSignalTests.blocks(mask, SIGUSR1) else { exit(13) }
            let signo = stats.capture_signal
            guard signo >= __libc_current_sigrtmin(), signo <= __libc_current_sigrtmax(), stats.signal_usable == 1
            else { exit(14) }
            exit(0)
        }
    }

    @Test(
        "Started from a thread that blocks every signal (a libdispatch worker), Aftermath's threads still let the backtracer pause them"
    )
    func threadsFromBlockedStarter() async {
        await #expect(processExitsWith: .success) {
            var all = sigset_t()
            sigfillset(&all)
            pthread_sigmask(SIG_BLOCK, &all, nil)
            WatchdogSignalTests.startManual("hang-blocked-starter")
            aft_unwind_resident_start()  // its donor too, as after a first hang
            // Each thread names itself as it begins: waited for, with no bound on the machine's speed.
            for _ in 0..<500 {
                let named = Set(StartAndDeliveryTests.threadNames())
                if named.isSuperset(of: ["aftermath.hang", "aftermath.ping", "aftermath.unw"]) { break }
                usleep(10_000)
            }
            let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
            var names: [String] = []
            for tid in tasks {
                let comm =
                    (try? String(contentsOfFile: "/proc/self/task/\(tid)/comm", encoding: .utf8))?
                    .trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
                guard comm.hasPrefix("aftermath."), let id = UInt64(tid),
                    let mask = WatchdogSignalTests.blockedMask(tid: id)
                else { continue }
                names.append(comm)
                // The unwinding helper's donor blocks everything (no handler may share the helper's
                // thread-local storage); a crash ends it before the backtracer runs.
                if comm == "aftermath.unw" {
                    guard [SIGUSR1, SIGUSR2, SIGPROF, SIGTERM].allSatisfy({ WatchdogSignalTests.blocks(mask, $0) })
                    else { exit(15) }
                    continue
                }
                guard [SIGUSR1, SIGUSR2, SIGPROF].contains(where: { !WatchdogSignalTests.blocks(mask, $0) }) else {
                    exit(12)
                }
                guard WatchdogSignalTests.blocks(mask, SIGTERM) else { exit(13) }
            }
            exit(Set(names) == ["aftermath.hang", "aftermath.ping", "aftermath.unw"] ? 0 : 11)
        }
    }

    @Test("A thread that blocks every signal lets the capture signal through once it beats")
    func admittedOnBind() async {
        await #expect(processExitsWith: .success) {
            WatchdogSignalTests.startManual("hang-admit")
            var stats = aft_watchdog_stats()
            aft_watchdog_get_stats(&stats)
            let signo = stats.capture_signal
            // As libdispatch's workers do: every asynchronous signal blocked.
            var all = sigset_t()
            sigfillset(&all)
            pthread_sigmask(SIG_BLOCK, &all, nil)
            Aftermath.heartbeat()
            var now = sigset_t()
            pthread_sigmask(SIG_BLOCK, nil, &now)
            exit(sigismember(&now, signo) == 0 && sigismember(&now, SIGTERM) == 1 ? 0 : 1)
        }
    }

    @Test("A crash withdrawn during a hang's capture leaves SIGPROF borrowed until the hang's lets it go")
    func sigprofSharedByCaptures() async {
        await #expect(processExitsWith: .success) {
            var handled = sigaction()
            handled.__sigaction_handler.sa_handler = { _ in }
            sigaction(SIGTRAP, &handled, nil)
            var config = Aftermath.Configuration(
                serviceName: "hang-test", serviceVersion: "1", exporter: InMemoryExporter(),
                reportsDirectory: TestSupport.childDirectory("hang-sigprof"))
            config.hangHeartbeat = .off
            config.watchConcurrencyPool = false
            do { try Aftermath.start(config) } catch { exit(10) }
            aft_install_complete()  // its requests for alternate stacks borrow SIGPROF too
            // A busy libdispatch-style worker: SIGPROF is the one signal that pauses it.
            guard aft_test_start_sigprof_spinner() == 0 else { exit(11) }
            aft_test_hang_capture_hold(0)  // every other thread paused, the worker by SIGPROF
            guard aft_test_hang_capture_borrowed_sigprof() == 1 else { exit(12) }
            raise(SIGTRAP)  // a crash's capture, then withdrawn: the app's handler returns
            // SIGPROF as the hang's capture still sends it (one that answers late): it must
            // still find the captures' handler, not the default action that ends the process.
            kill(getpid(), SIGPROF)
            usleep(20_000)
            guard aft_test_sigprof_owner() == 1 else { exit(13) }
            aft_test_hang_capture_release()
            // The last capture gives it back, unless a thread never answered it (a loaded
            // machine): then it stays the captures' for good, lest that answer end the process.
            exit(aft_test_sigprof_owner() == (aft_test_sigprof_stranded() == 1 ? 1 : 0) ? 0 : 14)
        }
    }
    #endif
}
