import Aftermath
import AftermathNextLaunch
import AftermathOTLP
import CSignalShim
import Foundation
import Testing
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// An exporter that is sent SIGTERM on its own thread while it holds the batch (the kernel
/// gives a process-directed signal to any thread that lets it through, the exporting one too).
final class TerminatedWhileExporting: LogExporter {
    func export(_ batch: LogBatch) throws {
        raise(SIGTERM)  // to this very thread, in the middle of the hand-off
        usleep(50_000)  // the rest of the hand-off: the signal must wait for its end
    }
}

/// A termination signal that lands on the thread handing records to the exporter: the process
/// still dies of it, once the hand-off is over and the records it handed are deleted, so the
/// next launch never sends them again.
@Suite("Termination during an export")
struct ExportTerminationTests {
    #if compiler(>=6.2)  // exit tests (#expect(processExitsWith:)) need Swift 6.2
    @Test("SIGTERM on the exporting thread: dies of it after the hand-off, the crash it sent is gone")
    func onTheExportingThread() async throws {
        let directory: String = TestSupport.childDirectory("term-on-exporter")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        await #expect(processExitsWith: .signal(SIGSEGV)) { [directory = directory as String] in
            ExitStatusTests.childStart(directory)
            UnsafeMutablePointer<Int>(bitPattern: 8)!.pointee = 1
        }
        #expect(ReportCollector(directory: ReportDirectory(root: directory)).collect().reports.count == 1)
        await #expect(processExitsWith: .signal(SIGTERM)) { [directory = directory as String] in
            // An app's thread has SIGTERM unblocked, with its default action (an exit test's may
            // inherit it blocked).
            signal(SIGTERM, SIG_DFL)
            var term = sigset_t()
            sigemptyset(&term)
            sigaddset(&term, SIGTERM)
            pthread_sigmask(SIG_UNBLOCK, &term, nil)
            // Delivered on the caller, an app thread, which lets SIGTERM through (Aftermath's own
            // threads block it): the signal lands on the exporting thread.
            let config = Aftermath.Configuration(
                serviceName: "term-tests", serviceVersion: "1", exporter: TerminatedWhileExporting(),
                reportsDirectory: directory, deliverPendingReportsSynchronously: true)
            do { try Aftermath.start(config) } catch { _exit(98) }
            _exit(0)
        }
        // What is left: the second run's own end (its SIGTERM), not the crash it handed over.
        let left = ReportCollector(directory: ReportDirectory(root: directory)).collect().reports
        #expect(!left.contains { $0.crash != nil }, "handed to the exporter, then deleted: \(left.map(\.path))")
    }
    #endif
}
