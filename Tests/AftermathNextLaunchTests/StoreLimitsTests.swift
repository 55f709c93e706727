import Foundation
import Testing
import AftermathNextLaunch
import AftermathTesting
import TestSupport

/// Bounds on what a launch reads: age and count limits for every kind of pending file.
@Suite("Store limits")
struct StoreLimitsTests {
    @Test("Every kind has an age limit: older crashes, hangs, errors and dead runs are rejected with the reason")
    func ageLimits() throws {
        let dir = try TestSupport.reportsDirectory()
        let golden = try TestSupport.fixture("v1/sigsegv-null-depth12.crash")
        try TestSupport.write(golden, to: dir.crashes + "/old.crash")
        try TestSupport.write(golden, to: dir.crashes + "/new.crash")
        Self.age(dir.crashes + "/old.crash", seconds: 3 * 24 * 3600)
        try TestSupport.write(Array("whatever".utf8), to: dir.hangs + "/old.hang")
        Self.age(dir.hangs + "/old.hang", seconds: 3 * 24 * 3600)
        try TestSupport.write(Array("whatever".utf8), to: dir.errors + "/old.error")
        Self.age(dir.errors + "/old.error", seconds: 3 * 24 * 3600)
        try TestSupport.write(Array("whatever".utf8), to: dir.runs + "/old.run")
        Self.age(dir.runs + "/old.run", seconds: 3 * 24 * 3600)
        var limits = ReportCollector.Limits()
        limits.maxReportAgeSeconds = 2 * 24 * 3600
        let collection = ReportCollector(directory: dir, limits: limits).collect()
        #expect(collection.reports.count == 1)
        #expect(collection.rejected.count == 4)
        for r in collection.rejected {
            #expect(r.reason.hasPrefix("older than 2 days"), "\(r.path): \(r.reason)")
        }
    }

    @Test("Pending errors and dead runs beyond their limits: the oldest are rejected before any is read")
    func countLimits() throws {
        let dir = try TestSupport.reportsDirectory()
        for i in 0..<10 {
            let path = dir.errors + "/e\(i).error"
            try TestSupport.write(Array("not decoded".utf8), to: path)
            Self.age(path, seconds: 100 - i)
            let run = dir.runs + "/r\(i).run"
            try TestSupport.write(Array("not decoded".utf8), to: run)
            Self.age(run, seconds: 100 - i)
        }
        var limits = ReportCollector.Limits()
        limits.maxPendingErrors = 4
        limits.maxPendingRuns = 3
        let collection = ReportCollector(directory: dir, limits: limits).collect()
        let retention = collection.rejected.filter { $0.reason.hasPrefix("retention") }.map {
            ($0.path as NSString).lastPathComponent
        }
        #expect(Set(retention) == Set((0..<6).map { "e\($0).error" } + (0..<7).map { "r\($0).run" }))
    }

    @Test("One collection removes at most its budget of files; the rest wait for later launches, unread")
    func removalBudget() throws {
        let dir = try TestSupport.reportsDirectory()
        let golden = try TestSupport.fixture("v1/sigsegv-null-depth12.crash")
        for i in 0..<10 {
            let path = dir.crashes + "/c\(i).crash"
            try TestSupport.write(golden, to: path)
            Self.age(path, seconds: 100 - i)
        }
        var limits = ReportCollector.Limits()
        limits.maxPendingCrashes = 2
        limits.maxRemovalsPerCollection = 3
        let first = ReportCollector(directory: dir, limits: limits).collect()
        #expect(first.reports.count == 2)
        #expect(
            Set(first.rejected.map { ($0.path as NSString).lastPathComponent }) == ["c0.crash", "c1.crash", "c2.crash"])
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.crashes).count == 7)
        let second = ReportCollector(directory: dir, limits: limits).collect()
        #expect(
            Set(second.rejected.map { ($0.path as NSString).lastPathComponent }) == [
                "c3.crash", "c4.crash", "c5.crash",
            ])
    }

    static func age(_ path: String, seconds: Int) {
        let t = time(nil) - seconds
        var times = [timespec(tv_sec: t, tv_nsec: 0), timespec(tv_sec: t, tv_nsec: 0)]
        _ = utimensat(AT_FDCWD, path, &times, AT_SYMLINK_NOFOLLOW)
    }

    @Test("The listing's own sort: every size in order, equal keys kept in their order (as the standard library's)")
    func stableSort() {
        var generator = SystemRandomNumberGenerator()
        for count in [0, 1, 2, 19, 20, 21, 64, 65, 257] {
            let items = (0..<count).map { (key: Int.random(in: 0..<8, using: &generator), position: $0) }
            let ours = StoreFiles.stablySorted(items) { $0.key < $1.key }
            let theirs = items.enumerated().sorted { ($0.element.key, $0.offset) < ($1.element.key, $1.offset) }
            #expect(ours.map(\.position) == theirs.map(\.element.position), "\(count) items")
        }
        let names = ["b.run", "a.ended", "c.run.tmp", "a.run"]
        #expect(StoreFiles.stablySorted(names, by: <) == names.sorted())
    }
}
