import Aftermath
import AftermathOTLP
import AftermathTesting
import CSignalShim
import Foundation
import HarnessSupport
import TestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Watched targets whose threads end: loops shut down without their watch stopped, threads that
/// end in the middle of a hang.
@Suite("Hang targets whose threads end")
struct HangTargetLifeTests {
    #if compiler(>=6.2)  // exit tests (#expect(processExitsWith:)) need Swift 6.2
    static func start(_ name: String, exporter: InMemoryExporter = InMemoryExporter()) -> Bool {
        var config = Aftermath.Configuration(
            serviceName: "hang-test", serviceVersion: "1", exporter: exporter,
            reportsDirectory: TestSupport.childDirectory(name), deliverPendingReportsSynchronously: true)
        config.watchConcurrencyPool = false
        config.hangHeartbeat = .manual
        return (try? Aftermath.start(config)) != nil
    }

    /// 0 when a finished hang of `target` lasting `milliseconds` reaches the exporter within 5 s;
    /// 12: none came, 13: it is not as expected.
    static func finishedHang(in exporter: InMemoryExporter, target: String, milliseconds: ClosedRange<Int>) -> Int32 {
        let deadline = Date().addingTimeInterval(5)
        while Date() < deadline, !exporter.records.contains(where: { $0.eventName == "apsio.hang" }) {
            usleep(20_000)
        }
        guard let r = exporter.records.first(where: { $0.eventName == "apsio.hang" }) else { return 12 }
        guard r[attribute: "apsio.hang.target"] == .string(target), r[attribute: "apsio.hang.unfinished"] == nil,
            let duration = r[attribute: "apsio.hang.duration"]?.intValue, milliseconds.contains(Int(duration))
        else { return 13 }
        return 0
    }

    @Test(
        "A watched loop that shut down is never given a job again and its target is freed; a stale handle's stop leaves the next target alone"
    )
    func loopShutDownUnwatched() async {
        await #expect(processExitsWith: .success) {
            guard HangTargetLifeTests.start("hang-loop-shutdown") else { exit(10) }
            guard let loop = TestEventLoop(named: "short") else { exit(20) }
            guard
                let watch = try? Aftermath.watchEventLoop(
                    named: "short", threshold: .milliseconds(300), schedule: loop.execute)
            else { exit(11) }
            usleep(600_000)
            guard loop.ran > 0 else { exit(12) }  // its pings ran: its thread is known
            loop.shutDown()
            usleep(2_600_000)  // an idle loop is pinged at least every 2 s
            guard loop.late == 0 else { exit(13) }
            // Its place was freed: every target can be taken again, and the stale handle's stop
            // changes none of them.
            var others: [HangWatch] = []
            while let w = try? Aftermath.watchThread(named: "t\(others.count)") { others.append(w) }
            guard others.count == Int(AFT_WATCH_MAX_TARGETS) - 1 else { exit(14) }
            others.forEach { $0.stop() }
            guard let next = TestEventLoop(named: "next") else { exit(20) }
            guard (try? Aftermath.watchEventLoop(named: "next", schedule: next.execute)) != nil else { exit(15) }
            watch.stop()
            let before = next.ran
            usleep(2_600_000)
            exit(next.ran > before ? 0 : 16)
        }
    }

    @Test(
        "A loop per core of a big host: 100 loops are each watched and pinged; shut down, their places are freed")
    func hundredLoops() async {
        await #expect(processExitsWith: .success) {
            guard HangTargetLifeTests.start("hang-hundred-loops") else { exit(10) }
            let loops = (0..<100).compactMap { TestEventLoop(named: "loop-\($0)") }
            guard loops.count == 100 else { exit(20) }
            for (i, loop) in loops.enumerated() {
                guard (try? Aftermath.watchEventLoop(named: "loop-\(i)", schedule: loop.execute)) != nil else {
                    exit(11)
                }
            }
            let deadline = Date().addingTimeInterval(5)
            while Date() < deadline, loops.contains(where: { $0.ran == 0 }) { usleep(50_000) }
            guard !loops.contains(where: { $0.ran == 0 }) else { exit(12) }
            loops.forEach { $0.shutDown() }
            usleep(2_600_000)  // an idle loop is pinged at least every 2 s: each is seen ended
            // Every place was freed: all 255 can be taken again.
            var others: [HangWatch] = []
            while let w = try? Aftermath.watchThread(named: "t\(others.count)") { others.append(w) }
            exit(others.count == Int(AFT_WATCH_MAX_TARGETS) - 1 ? 0 : 13)
        }
    }

    @Test("A hang of a watched thread that ends during it is finished then, and reported in this run")
    func threadEndsInItsHang() async {
        await #expect(processExitsWith: .success) {
            let exporter = InMemoryExporter()
            guard HangTargetLifeTests.start("hang-thread-ends", exporter: exporter) else { exit(10) }
            guard let watch = try? Aftermath.watchThread(named: "worker", threshold: .milliseconds(200)) else {
                exit(11)
            }
            let done = DispatchSemaphore(value: 0)
            Thread.detachNewThread {
                for _ in 0..<15 {
                    watch.beat()
                    usleep(20_000)
                }
                usleep(900_000)  // its hang, then it ends without a beat
                done.signal()
            }
            done.wait()
            exit(HangTargetLifeTests.finishedHang(in: exporter, target: "worker", milliseconds: 600...1600))
        }
    }

    @Test("A unit of work whose thread ends during its hang is finished then, and its slot freed")
    func unitThreadEndsInItsHang() async {
        await #expect(processExitsWith: .success) {
            let exporter = InMemoryExporter()
            guard HangTargetLifeTests.start("hang-unit-ends", exporter: exporter) else { exit(10) }
            guard let work = try? Aftermath.watchWork(named: "job", threshold: .milliseconds(200)) else { exit(11) }
            let done = DispatchSemaphore(value: 0)
            Thread.detachNewThread {
                _ = work.begin()  // never ended: its thread leaves in the middle
                usleep(700_000)
                done.signal()
            }
            done.wait()
            let found = HangTargetLifeTests.finishedHang(in: exporter, target: "job", milliseconds: 400...1400)
            guard found == 0 else { exit(found) }
            // Every unit slot can be taken again.
            let units = (0..<Int(AFT_WATCH_MAX_UNITS)).map { _ in work.begin() }
            let watched = units.filter(\.isWatched).count
            units.forEach { $0.end() }
            exit(watched == Int(AFT_WATCH_MAX_UNITS) ? 0 : 14)
        }
    }
    #endif
}
