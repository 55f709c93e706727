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

/// An exporter that is sent SIGTERM on its own thread while it holds the batch, then takes 3 s
/// more to acknowledge it (a slow collector). It notes the uids it was handed first, and that
/// it finished, which a process ended at once never reaches.
final class TerminatedWhileExporting: LogExporter {
    func export(_ batch: LogBatch) throws {
        let uids = batch.records.compactMap { $0[attribute: "log.record.uid"]?.stringValue }.joined(separator: "\n")
        _ = FileManager.default.createFile(
            atPath: ProcessInfo.processInfo.environment["HANDED_UIDS"] ?? "/dev/null", contents: Data(uids.utf8))
        raise(SIGTERM)  // to this very thread, in the middle of the hand-off
        usleep(3_000_000)
        // Reached only if the termination was held for the export.
        _ = FileManager.default.createFile(
            atPath: (ProcessInfo.processInfo.environment["HANDED_UIDS"] ?? "/dev/null") + ".finished", contents: nil)
    }
}

/// A termination signal that lands on the thread handing records to the exporter (an app's
/// thread delivering on the caller): the process ends at once, as it would without Aftermath,
/// never held for the export, and what was handed over stays for the next launch, under the
/// same record ids, so a backend that got it drops the second copy.
@Suite("Termination during an export")
struct ExportTerminationTests {
    #if compiler(>=6.2)  // exit tests (#expect(processExitsWith:)) need Swift 6.2
    @Test("SIGTERM on the exporting thread: dies of it at once; the crash stays, its uid unchanged")
    func onTheExportingThread() async throws {
        let directory: String = TestSupport.childDirectory("term-on-exporter")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        await #expect(processExitsWith: .signal(SIGSEGV)) { [directory = directory as String] in
            ExitStatusTests.childStart(directory)
            UnsafeMutablePointer<Int>(bitPattern: 8)!.pointee = 1
        }
        await #expect(processExitsWith: .signal(SIGTERM)) { [directory = directory as String] in
            // An app's thread has SIGTERM unblocked, with its default action (an exit test's may
            // inherit it blocked).
            signal(SIGTERM, SIG_DFL)
            var term = sigset_t()
            sigemptyset(&term)
            sigaddset(&term, SIGTERM)
            pthread_sigmask(SIG_UNBLOCK, &term, nil)
            setenv("HANDED_UIDS", directory + "/handed.txt", 1)
            // Delivered on the caller, which lets SIGTERM through (Aftermath's own threads block
            // it): the signal lands on the exporting thread.
            let config = Aftermath.Configuration(
                serviceName: "term-tests", serviceVersion: "1", exporter: TerminatedWhileExporting(),
                reportsDirectory: directory, deliverPendingReportsSynchronously: true)
            do { try Aftermath.start(config) } catch { _exit(98) }
            _exit(0)
        }
        #expect(
            !FileManager.default.fileExists(atPath: directory + "/handed.txt.finished"), "not held for the 3 s export")
        let handed = try String(contentsOfFile: directory + "/handed.txt", encoding: .utf8)
        let crash = try #require(
            ReportCollector(directory: ReportDirectory(root: directory)).collect().reports.first { $0.crash != nil })
        #expect(!handed.isEmpty && crash.record[attribute: "log.record.uid"]?.stringValue == handed)
    }
    #endif
}
