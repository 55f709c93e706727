import Aftermath
import AftermathNextLaunch
import AftermathTesting
import CHarnessFaults
import CSignalShim
import Foundation
import Testing
import TestSupport

/// An app that takes the capture signal (the watchdog's real-time signal) for a handler of its
/// own after start: a crash still pauses the other threads, with SIGPROF.
@Suite("The capture signal taken by the app")
struct CaptureSignalTakenTests {
    #if compiler(>=6.2)  // exit tests (#expect(processExitsWith:)) need Swift 6.2
    @Test("Parked workers still answer a crash's capture, by SIGPROF, when the app took the capture signal")
    func workersAnswerBySIGPROF() async throws {
        let directory: String = TestSupport.childDirectory("capture-signal-taken")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        await #expect(processExitsWith: .signal(SIGSEGV)) { [directory = directory as String] in
            ExitStatusTests.childStart(directory)
            var stats = aft_watchdog_stats()
            for _ in 0..<200 where stats.capture_signal == 0 || stats.watchdog_tid == 0 {
                usleep(10_000)
                aft_watchdog_get_stats(&stats)
            }
            guard stats.capture_signal > 0 else { _exit(96) }
            guard aft_test_start_workers(AFT_TEST_WORKER_PARKED, 4) == 0 else { _exit(97) }
            // The app's own handler on that signal, installed after start.
            var action = sigaction()
            action.__sigaction_handler.sa_handler = { _ in }
            sigemptyset(&action.sa_mask)
            guard sigaction(Int32(stats.capture_signal), &action, nil) == 0 else { _exit(98) }
            UnsafeMutablePointer<Int>(bitPattern: 8)!.pointee = 1
        }
        let crash = try #require(EveryThreadTests.crashes(directory).first)
        let capture = try #require(crash.threadCapture)
        #expect(capture.answered >= 4, "\(capture)")
        for i in 0..<4 {
            let worker = try #require(crash.threads.first { $0.name == "worker-\(i)" })
            #expect(
                worker.contextSource == .signal && worker.missingContext == nil,
                "worker-\(i): \(worker.contextSource), \(String(describing: worker.missingContext))")
            #expect(worker.registers.count >= 17 && !worker.stack.isEmpty)
        }
    }
    #endif
}
