import Aftermath
import AftermathNextLaunch
import AftermathOTLP
import CSignalShim
import Foundation
import Synchronization
import Testing
import TestSupport

/// The app's exporter code runs on start's delivery thread: the threads it creates there are the
/// app's (a crash pauses and records them), while the delivery thread stays Aftermath's and goes
/// on through a crash.
@Suite("Exporter threads")
struct ExporterThreadTests {
    #if compiler(>=6.2)  // exit tests (#expect(processExitsWith:)) need Swift 6.2
    /// Creates a thread in each export, as an exporter that starts a task or a network client
    /// does, and keeps that thread's name.
    final class ThreadMakingExporter: LogExporter, @unchecked Sendable {
        let names = Mutex<[String]>([])
        func export(_ batch: LogBatch) throws {
            let done = DispatchSemaphore(value: 0)
            let thread = Thread {
                let comm = (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? "?"
                self.names.withLock { $0.append(comm.trimmingCharacters(in: .newlines)) }
                done.signal()
            }
            thread.start()
            done.wait()
        }
    }

    @Test(
        "A thread the app's exporter creates during start's delivery has the app's name, so a crash pauses and records it"
    )
    func exporterThreadsAreTheApps() async throws {
        let directory: String = TestSupport.childDirectory("exporter-threads")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let reports = ReportDirectory(root: directory)
        try reports.prepare()
        try TestSupport.pendingCrash(in: reports)
        await #expect(processExitsWith: .success) { [directory = directory as String] in
            let exporter = ThreadMakingExporter()
            let config = Aftermath.Configuration(
                serviceName: "names", serviceVersion: "1", exporter: exporter, reportsDirectory: directory)
            do { try Aftermath.start(config) } catch { _exit(2) }
            for _ in 0..<5000 where Aftermath.lastDelivery == nil { usleep(1000) }
            let names = exporter.names.withLock { $0 }
            guard !names.isEmpty else { _exit(3) }
            _exit(names.allSatisfy { !$0.hasPrefix("aftermath.") && $0 != "?" } ? 0 : 4)
        }
    }

    /// Has the main thread crash while it exports, waits until the crash handler has begun,
    /// then writes a file and returns: a delivery thread paused by the crash never writes it.
    final class CrashingExporter: LogExporter, @unchecked Sendable {
        static let crashNow = Atomic<Bool>(false)
        let marker: String
        init(marker: String) { self.marker = marker }
        func export(_ batch: LogBatch) throws {
            Self.crashNow.store(true, ordering: .sequentiallyConsistent)
            let deadline = Date().addingTimeInterval(5)
            while aft_crash_in_progress() == 0, Date() < deadline { sched_yield() }
            usleep(20_000)  // a receiver answering: in a system call while the crash is written
            // The file holds the exporting thread's id and the name the export ran under.
            let comm = (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? "?"
            let name = "\(aft_gettid()) \(comm)"
            let fd = open(marker, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            guard fd >= 0 else { return }
            _ = name.utf8CString.withUnsafeBytes { write(fd, $0.baseAddress, $0.count - 1) }
            close(fd)
        }
    }

    @Test(
        "A crash while start's delivery exports: the delivery thread is listed as Aftermath's, not paused, and its export goes on"
    )
    func deliveryGoesOnThroughACrash() async throws {
        let directory: String = TestSupport.childDirectory("crash-while-exporting")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let reports = ReportDirectory(root: directory)
        try reports.prepare()
        _ = try TestSupport.pendingCrash(in: reports)
        let marker = directory + "/exported-during-crash"
        await #expect(processExitsWith: .signal(SIGSEGV)) {
            [directory = directory as String, marker = marker as String] in
            // The app's own handler, chained after Aftermath's: the process dies 300 ms after
            // the crash was written, time for the export to finish.
            signal(SIGSEGV) { _ in
                usleep(300_000)
                signal(SIGSEGV, SIG_DFL)
            }
            let config = Aftermath.Configuration(
                serviceName: "crash-while-exporting", serviceVersion: "1",
                exporter: CrashingExporter(marker: marker), reportsDirectory: directory, fsyncReports: false)
            do { try Aftermath.start(config) } catch { _exit(2) }
            let deadline = Date().addingTimeInterval(10)
            while !CrashingExporter.crashNow.load(ordering: .sequentiallyConsistent) {
                if Date() > deadline { _exit(3) }
                usleep(1000)
            }
            UnsafeMutablePointer<Int>(bitPattern: 8)!.pointee = 1
        }
        let exported = try #require(
            try? String(contentsOfFile: marker, encoding: .utf8), "the export went on after the crash began")
        let parts = exported.split(separator: " ", maxSplits: 1)
        let exporterID = try #require(parts.first.flatMap { UInt64($0) })
        let exportedAs = parts.count > 1 ? String(parts[1]) : ""
        #expect(!exportedAs.hasPrefix("aftermath."), "the export ran under the app's name: \(exportedAs)")
        let crashes = ReportCollector(directory: reports).collect(moveRejected: false).reports.compactMap(\.crash)
        let crash = try #require(crashes.first { $0.threads.first?.crashed == true }, "the crash the export raced")
        let exporting = try #require(crash.threads.first { $0.id == exporterID })
        #expect(exporting.isAftermath && exporting.missingContext == .aftermath, "listed, not paused")
        // Where it handed the batch to the app's exporter: a context every minidump reader takes.
        #expect(exporting.contextSource == .parked && exporting.sp != 0 && exporting.frames == [exporting.pc])
        #expect(exporting.name.hasPrefix("aftermath."), "under its own name: \(exporting.name)")
    }
    #endif
}
