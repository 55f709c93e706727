import AftermathNextLaunch
import AftermathOTLP
import CSignalShim
import AftermathSymbolication
import AftermathTesting
import TestSupport
import Foundation
import Testing

/// The next launch's view of a reports directory: good files reported, bad ones rejected with
/// a reason, nothing deleted before the exporter acknowledges.
@Suite("Report collector")
struct ReportCollectorTests {
    @Test("Bad files are moved aside with a reason and never block the good one")
    func badFilesSetAside() throws {
        let dir = try TestSupport.reportsDirectory()
        let golden = try TestSupport.fixture("v1/sigsegv-null-depth12.crash")
        let crashes = dir.crashes
        try TestSupport.write(golden, to: crashes + "/good.crash")
        try TestSupport.write(Array(golden.prefix(700)), to: crashes + "/truncated.crash")
        var flipped = golden
        flipped[3000] ^= 1
        try TestSupport.write(flipped, to: crashes + "/damaged.crash")
        try TestSupport.write(Array("hello".utf8), to: crashes + "/foreign.crash")
        try TestSupport.write([], to: crashes + "/empty.crash")
        try FileManager.default.createDirectory(
            atPath: crashes + "/directory.crash", withIntermediateDirectories: false)
        try FileManager.default.createSymbolicLink(atPath: crashes + "/link.crash", withDestinationPath: "/etc/passwd")
        try TestSupport.write(Array(repeating: 7, count: ReportFile.maximumSize + 10), to: crashes + "/huge.crash")
        try TestSupport.write(Array("x".utf8), to: crashes + "/notes.txt")

        let collection = ReportCollector(directory: dir).collect()
        #expect(collection.reports.count == 1)
        #expect(collection.reports.first?.record.eventName == "app.crash")
        let reasons = Dictionary(
            uniqueKeysWithValues: collection.rejected.map { (($0.path as NSString).lastPathComponent, $0.reason) })
        #expect(reasons.count == 8)
        #expect(
            reasons["truncated.crash"]?.contains("truncated") == true
                || reasons["truncated.crash"]?.contains("body is") == true)
        #expect(reasons["damaged.crash"]?.hasPrefix("CRC mismatch") == true)
        #expect(reasons["foreign.crash"]?.contains("truncated") == true)
        #expect(reasons["empty.crash"]?.contains("truncated") == true)
        #expect(reasons["directory.crash"] == "not a regular file (a directory)")
        #expect(reasons["link.crash"] == "not a regular file (a symbolic link)")
        #expect(reasons["huge.crash"]?.hasPrefix("too large") == true)
        #expect(reasons["notes.txt"] == "unexpected file in crashes/")
        // Moved aside, each with its reason file; the symlink's target is untouched.
        let rejected = try FileManager.default.contentsOfDirectory(atPath: dir.rejected)
        #expect(rejected.filter { $0.hasSuffix(".reason") }.count == 8)
        let reason = try String(contentsOfFile: dir.rejected + "/damaged.crash.reason", encoding: .utf8)
        #expect(reason.hasPrefix("CRC mismatch"))
        #expect(FileManager.default.fileExists(atPath: "/etc/passwd"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: crashes) == ["good.crash"])
    }

    @Test("Nothing is deleted before the exporter acknowledges; then the file is gone")
    func acknowledgement() throws {
        let dir = try TestSupport.reportsDirectory()
        try TestSupport.write(try TestSupport.fixture("v1/sigsegv-null-depth12.crash"), to: dir.crashes + "/a.crash")
        let exporter = InMemoryExporter()
        exporter.failNext(1)
        let collector = ReportCollector(directory: dir)
        let refused = collector.deliver(to: exporter, resource: Resource())
        #expect(refused.exported == 0 && refused.exportError != nil)
        #expect(FileManager.default.fileExists(atPath: dir.crashes + "/a.crash"))
        let accepted = collector.deliver(to: exporter, resource: Resource())
        #expect(accepted.exported == 1, "\(accepted.exportError ?? "no error"), rejected \(accepted.rejected)")
        #expect(!FileManager.default.fileExists(atPath: dir.crashes + "/a.crash"))
        #expect(exporter.records.count == 1)
        let again = collector.deliver(to: exporter, resource: Resource())
        #expect(again.exported == 0)
    }

    @Test(
        "A crash left under two names (a delivery that died between naming a committed reserve and removing its old name) is sent once, and both names go"
    )
    func crashUnderTwoNamesSentOnce() throws {
        let dir = try TestSupport.reportsDirectory()
        let crash = try TestSupport.pendingCrash(in: dir)
        let named = dir.crashes + "/\(crash.context.reportID.fileStem).crash"
        let reserve = dir.crashes + "/" + String(repeating: "c", count: 32) + ".crash.tmp"
        #expect(link(named, reserve) == 0)
        let exporter = InMemoryExporter()
        let delivery = ReportCollector(directory: dir).deliver(to: exporter, resource: Resource())
        #expect(delivery.exported == 1 && exporter.records.count == 1, "\(exporter.records.count) records")
        let left = (try? FileManager.default.contentsOfDirectory(atPath: dir.crashes)) ?? []
        #expect(left.isEmpty, "\(left)")
    }

    /// An exporter that asks for a delivery of the same directory from inside its export, as an
    /// app's exporter calling `deliverPendingReports` would.
    final class NestingExporter: LogExporter, @unchecked Sendable {
        let collector: ReportCollector
        let base = InMemoryExporter()
        var nested: ReportCollector.Delivery?
        init(_ collector: ReportCollector) { self.collector = collector }
        func export(_ batch: LogBatch) throws {
            if nested == nil { nested = collector.deliver(to: self, resource: Resource()) }
            try base.export(batch)
        }
    }

    @Test("A delivery asked for from inside one (by its exporter) is refused, not a hang; the first goes on")
    func nestedDeliveryRefused() throws {
        let dir = try TestSupport.reportsDirectory()
        try TestSupport.write(try TestSupport.fixture("v1/sigsegv-null-depth12.crash"), to: dir.crashes + "/a.crash")
        let collector = ReportCollector(directory: dir)
        let exporter = NestingExporter(collector)
        let delivery = collector.deliver(to: exporter, resource: Resource())
        #expect(exporter.nested?.exported == 0)
        #expect(exporter.nested?.exportError == ReportCollector.nestedDeliveryError)
        #expect(delivery.exported == 1 && exporter.base.records.count == 1)
        // The lock is given back: the next delivery runs (nothing left to send).
        #expect(collector.deliver(to: exporter.base, resource: Resource()).exportError == nil)
    }

    @Test("A crash of the delivering process itself is left for the next launch, untouched")
    func ownRunsCrashIsNotDelivered() throws {
        let dir = try TestSupport.reportsDirectory()
        let crash = try TestSupport.pendingCrash(in: dir)
        let path = dir.crashes + "/\(crash.context.reportID.fileStem).crash"
        let exporter = InMemoryExporter()
        // Another thread of this run crashed while this one delivers: not this delivery's.
        let same = ReportCollector(directory: dir, currentRunID: crash.context.runID)
        #expect(same.deliver(to: exporter, resource: Resource()).exported == 0)
        #expect(exporter.records.isEmpty && FileManager.default.fileExists(atPath: path))
        // The next launch (another run) sends it, once.
        let next = ReportCollector(directory: dir, currentRunID: UUID())
        #expect(next.deliver(to: exporter, resource: Resource()).exported == 1)
        #expect(exporter.records.count == 1 && !FileManager.default.fileExists(atPath: path))
    }

    @Test("The debug command's read-only collection changes nothing on disk")
    func readOnlyCollection() throws {
        let dir = try TestSupport.reportsDirectory()
        try TestSupport.write(Array("junk".utf8), to: dir.crashes + "/bad.crash")
        let collection = ReportCollector(directory: dir).collect(moveRejected: false)
        #expect(collection.rejected.count == 1 && collection.rejected[0].movedTo == nil)
        #expect(FileManager.default.fileExists(atPath: dir.crashes + "/bad.crash"))
    }

    @Test("Reserved crash files: a live run's is left alone, a dead run's empty one removed")
    func reserves() throws {
        let dir = try TestSupport.reportsDirectory()
        let live = dir.crashes + "/live.crash.tmp"
        try TestSupport.write([], to: live)
        let fd = open(live, O_RDWR)
        defer { close(fd) }
        #expect(flock(fd, LOCK_EX | LOCK_NB) == 0)
        // flock locks belong to the open file description: a second open in this process
        // conflicts like another process would.
        try TestSupport.write([], to: dir.crashes + "/dead.crash.tmp")
        // Sized at start, never written: zeros to its size.
        try TestSupport.write([UInt8](repeating: 0, count: 36 * 1024), to: dir.crashes + "/sized.crash.tmp")
        let collection = ReportCollector(directory: dir).collect()
        #expect(collection.reports.isEmpty && collection.rejected.isEmpty)
        #expect(FileManager.default.fileExists(atPath: live))
        #expect(!FileManager.default.fileExists(atPath: dir.crashes + "/dead.crash.tmp"))
        #expect(!FileManager.default.fileExists(atPath: dir.crashes + "/sized.crash.tmp"))
    }

    @Test("A sized reserve with bytes in its header is a dead handler's: salvaged or set aside, never removed unread")
    func sizedReserveWritten() throws {
        let dir = try TestSupport.reportsDirectory()
        var bytes = [UInt8](repeating: 0, count: 36 * 1024)
        bytes.replaceSubrange(0..<4, with: Array("AFTM".utf8))
        try TestSupport.write(bytes, to: dir.crashes + "/torn.crash.tmp")
        let collection = ReportCollector(directory: dir).collect(moveRejected: false)
        #expect(collection.rejected.map { ($0.path as NSString).lastPathComponent } == ["torn.crash.tmp"])
        #expect(FileManager.default.fileExists(atPath: dir.crashes + "/torn.crash.tmp"))
    }

    @Test("A read-only reports directory: collection still works, nothing crashes")
    func readOnlyDirectory() throws {
        let dir = try TestSupport.reportsDirectory()
        try TestSupport.write(try TestSupport.fixture("v1/sigsegv-null-depth12.crash"), to: dir.crashes + "/a.crash")
        try TestSupport.write(Array("junk".utf8), to: dir.crashes + "/b.crash")
        // Make rejected/ unusable (a file where the directory should be) so moving aside fails.
        try FileManager.default.removeItem(atPath: dir.rejected)
        try TestSupport.write([], to: dir.rejected)
        let collection = ReportCollector(directory: dir).collect()
        #expect(collection.reports.count == 1)
        #expect(collection.rejected.count == 1)
        #expect(collection.rejected[0].reason.contains("could not move aside"))
        #expect(FileManager.default.fileExists(atPath: dir.crashes + "/b.crash"))
    }

    @Test("More than 64 pending crashes: the oldest are rejected with the reason, the rest reported")
    func retention() throws {
        let dir = try TestSupport.reportsDirectory()
        let golden = try TestSupport.fixture("v1/sigsegv-null-depth12.crash")
        for i in 0..<70 {
            let path = dir.crashes + "/c\(i).crash"
            try TestSupport.write(golden, to: path)
            // Recent (within the age limit), one second apart.
            let t = time(nil) - 1000 + i
            var times = [timespec(tv_sec: t, tv_nsec: 0), timespec(tv_sec: t, tv_nsec: 0)]
            #expect(utimensat(AT_FDCWD, path, &times, 0) == 0)
        }
        let collection = ReportCollector(directory: dir).collect()
        #expect(collection.reports.count == 64)
        #expect(collection.rejected.count == 6)
        #expect(collection.rejected.allSatisfy { $0.reason.hasPrefix("retention") })
        #expect(
            Set(collection.rejected.map { ($0.path as NSString).lastPathComponent })
                == Set((0..<6).map { "c\($0).crash" }))
    }

    @Test("start() refuses a reports directory it cannot use, with the reason")
    func unusableDirectory() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("aftermath-file-\(UUID())").path
        try TestSupport.write([], to: file)
        #expect(throws: ReportDirectoryError.self) {
            try ReportDirectory(root: file + "/reports").prepare()
        }
    }
}
