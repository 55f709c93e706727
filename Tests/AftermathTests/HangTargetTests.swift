import Aftermath
import AftermathNextLaunch
import AftermathOTLP
import AftermathTesting
import CSignalShim
import Foundation
import TestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The watched targets besides the main thread: their records, and the API's limits.
@Suite("Hang targets")
struct HangTargetTests {
    static func target(
        kind: UInt32, name: String, width: UInt32 = 0, jobs: UInt32 = 0, blocked: UInt32 = 0, busy: UInt32 = 0,
        suppressed: UInt32 = 0
    ) -> aft_hang_target {
        var t = aft_hang_target()
        CString.write(name, into: &t.name)
        t.kind = kind
        t.pool_width = width
        t.pool_jobs = jobs
        t.pool_blocked = blocked
        t.pool_busy = busy
        t.suppressed = suppressed
        return t
    }

    static func record(_ target: aft_hang_target?) throws -> LogRecord {
        let file = try ReportFile.decode(HangFileTests.hangFile(finished: true, target: target))
        return HangRecordMapper.hang(try HangReport(file: file), observedTimeUnixNano: 1)
    }

    @Test(
        "An event loop's hang names its kind, its target and the loop's thread; a file without a target is the main thread's"
    )
    func eventLoop() throws {
        let r = try Self.record(Self.target(kind: UInt32(AFT_HANG_KIND_EVENT_LOOP), name: "loop-3", suppressed: 2))
        #expect(r[attribute: "apsio.hang.kind"] == .string("event_loop"))
        #expect(r[attribute: "apsio.hang.target"] == .string("loop-3"))
        #expect(r[attribute: "thread.name"] == .string("shop"))
        #expect(r[attribute: "apsio.hang.suppressed"] == .int(2))
        #expect(r[attribute: "apsio.hang.pool.width"] == nil)
        let main = try Self.record(nil)
        #expect(main[attribute: "apsio.hang.kind"] == .string("main"))
        #expect(main[attribute: "apsio.hang.target"] == .string("main"))
        #expect(main[attribute: "apsio.hang.suppressed"] == nil)
    }

    @Test(
        "A starved pool says how wide it is, how many workers run a job and whether they are blocked or busy",
        arguments: [(2 as UInt32, 0 as UInt32, "blocked"), (0, 4, "saturated"), (0, 0, "unknown")])
    func pool(blocked: UInt32, busy: UInt32, state: String) throws {
        let r = try Self.record(
            Self.target(
                kind: UInt32(AFT_HANG_KIND_CONCURRENCY_POOL), name: "concurrency-pool.medium", width: 4,
                jobs: blocked + busy, blocked: blocked, busy: busy))
        #expect(r[attribute: "apsio.hang.kind"] == .string("concurrency_pool"))
        #expect(r[attribute: "apsio.hang.pool.width"] == .int(4))
        #expect(r[attribute: "apsio.hang.pool.jobs"] == .int(Int64(blocked + busy)))
        #expect(r[attribute: "apsio.hang.pool.blocked"] == .int(Int64(blocked)))
        #expect(r[attribute: "apsio.hang.pool.busy"] == .int(Int64(busy)))
        #expect(r[attribute: "apsio.hang.pool.state"] == .string(state))
    }

    @Test("An unfinished hang's target is named in the abnormal exit's evidence; a main thread's is not")
    func evidence() throws {
        let loop = try ReportFile.decode(
            HangFileTests.hangFile(
                finished: false, target: Self.target(kind: UInt32(AFT_HANG_KIND_EVENT_LOOP), name: "loop-0")))
        #expect(HangReport.targetDescription(loop) == "event loop loop-0, thread shop")
        let pool = try ReportFile.decode(
            HangFileTests.hangFile(
                finished: false,
                target: Self.target(kind: UInt32(AFT_HANG_KIND_CONCURRENCY_POOL), name: "concurrency-pool.medium")))
        #expect(HangReport.targetDescription(pool) == "concurrency pool concurrency-pool.medium")
        #expect(HangReport.targetDescription(try ReportFile.decode(HangFileTests.hangFile(finished: false))) == nil)
    }

    @Test("A hostile target section (no NUL in its name, an unknown kind) decodes to a bounded name and kind unknown")
    func hostileTarget() throws {
        var t = aft_hang_target()
        withUnsafeMutableBytes(of: &t.name) { _ = $0.initializeMemory(as: UInt8.self, repeating: 0x41) }
        t.kind = 0xFFFF_FFFF
        let r = try Self.record(t)
        #expect(r[attribute: "apsio.hang.kind"] == .string("unknown"))
        #expect((r[text: "apsio.hang.target"] ?? "").count <= Int(AFT_SHORT_STRING))
    }

    #if compiler(>=6.2)  // exit tests (#expect(processExitsWith:)) need Swift 6.2
    @Test("With nothing watched but the main thread (the pool off), its hang is still seen")
    func mainAlone() async {
        await #expect(processExitsWith: .success) {
            var config = Aftermath.Configuration(
                serviceName: "hang-test", serviceVersion: "1", exporter: InMemoryExporter(),
                reportsDirectory: TestSupport.childDirectory("hang-main-alone"),
                deliverPendingReportsSynchronously: true)
            config.watchConcurrencyPool = false
            config.hangHeartbeat = .manual
            do { try Aftermath.start(config) } catch { exit(10) }
            for _ in 0..<30 {
                Aftermath.heartbeat()
                usleep(10_000)
            }
            usleep(800_000)
            for _ in 0..<30 {
                Aftermath.heartbeat()
                usleep(10_000)
            }
            var stats = aft_watchdog_stats()
            aft_watchdog_get_stats(&stats)
            exit(stats.hangs == 1 ? 0 : 11)
        }
    }

    @Test("A paused work target's units are no hang; a unit ended twice never ends the unit that took its slot")
    func unitsPausedAndEndedTwice() async {
        await #expect(processExitsWith: .success) {
            var config = Aftermath.Configuration(
                serviceName: "hang-test", serviceVersion: "1", exporter: InMemoryExporter(),
                reportsDirectory: TestSupport.childDirectory("hang-units"), deliverPendingReportsSynchronously: true)
            config.watchConcurrencyPool = false
            do { try Aftermath.start(config) } catch { exit(10) }
            guard let work = try? Aftermath.watchWork(named: "job", threshold: .milliseconds(100)) else { exit(11) }
            work.withoutHangDetection { work.measure { usleep(400_000) } }
            var stats = aft_watchdog_stats()
            aft_watchdog_get_stats(&stats)
            guard stats.hangs == 0 else { exit(12) }
            let first = work.begin()
            first.end()
            let second = work.begin()  // the slot the first had
            first.end()  // again: must not end the second
            usleep(400_000)
            second.end()
            usleep(200_000)
            aft_watchdog_get_stats(&stats)
            exit(stats.hangs == 1 ? 0 : 13)
        }
    }

    @Test("Targets: a zero threshold is refused, 255 besides the main thread at most, a stopped one's place is reused")
    func limits() async {
        await #expect(processExitsWith: .success) {
            guard (try? Aftermath.watchThread(named: "x", threshold: .zero)) == nil else { exit(10) }
            var watches: [HangWatch] = []
            while let w = try? Aftermath.watchThread(named: "t\(watches.count)") { watches.append(w) }
            guard watches.count == Int(AFT_WATCH_MAX_TARGETS) - 1 else { exit(11) }
            do {
                _ = try Aftermath.watchWork(named: "one too many")
                exit(12)
            } catch HangWatchError.tooManyTargets {
            } catch { exit(13) }
            watches[5].stop()
            guard (try? Aftermath.watchWork(named: "in its place")) != nil else { exit(14) }
            exit(0)
        }
    }

    @Test(
        "Units of work past the threshold are recorded 10 times, then left out and counted; more units than slots are not watched, never a fault"
    )
    func rateLimitAndUnits() async {
        await #expect(processExitsWith: .success) {
            var config = Aftermath.Configuration(
                serviceName: "hang-test", serviceVersion: "1", exporter: InMemoryExporter(),
                reportsDirectory: TestSupport.childDirectory("hang-targets"), deliverPendingReportsSynchronously: true)
            config.watchConcurrencyPool = false
            // The other threads' stacks are not what this counts: without them each capture
            // holds the watchdog a fraction as long, and on a loaded machine no unit ends
            // unseen while it runs.
            config.hangOtherThreads = false
            do { try Aftermath.start(config) } catch { exit(10) }
            // libunwind loaded now, as in a process that hung or recorded an error before: a
            // first capture that also loads it holds the watchdog longer than a unit lasts here
            // on a loaded machine, and the units meanwhile would be missed, not counted.
            _ = aft_libunwind_preload()
            guard let work = try? Aftermath.watchWork(named: "job", threshold: .milliseconds(20)) else { exit(11) }
            // 400 ms a unit: a loaded machine (the whole suite's exit tests at once) has held the
            // watchdog past a 150 ms unit's end, which then went unseen. 14 of them stay well
            // inside the rate limit's refill (AFT_WATCH_RATE_REFILL_S).
            for _ in 0..<14 { work.measure { usleep(400_000) } }
            var stats = aft_watchdog_stats()
            aft_watchdog_get_stats(&stats)
            guard stats.hangs == UInt64(AFT_WATCH_RATE_BURST), stats.rate_limited == 14 - UInt64(AFT_WATCH_RATE_BURST)
            else { exit(Int32(30 + min(stats.hangs, 14) * 15 + min(stats.rate_limited, 14))) }  // both counts
            let units = (0..<Int(AFT_WATCH_MAX_UNITS) + 10).map { _ in work.begin() }
            let unwatched = units.filter { !$0.isWatched }.count
            units.forEach { $0.end() }
            exit(unwatched == 10 ? 0 : 13)
        }
    }

    @Test("A later start's pool probes replace the earlier start's, one per priority, tagged with it")
    func poolProbesReplacedAtRestart() async {
        await #expect(processExitsWith: .success) {
            func poolTags() -> [Int32] {  // through aft_watch_next_tagged's handles
                var listed: [Int32] = []
                var target = aft_watch_next_tagged(0)
                while target > 0 {
                    guard aft_watch_active(target) == 1, listed.count < Int(AFT_WATCH_MAX_TARGETS) else { return [-2] }
                    listed.append(aft_watch_tag(target))
                    target = aft_watch_next_tagged(target)
                }
                return listed.sorted()
            }
            var config = Aftermath.Configuration(
                serviceName: "hang-test", serviceVersion: "1", exporter: InMemoryExporter(),
                reportsDirectory: TestSupport.childDirectory("hang-pool-restart"),
                deliverPendingReportsSynchronously: true)
            config.concurrencyPoolPriorities = [.high, .low, .high]
            do { try Aftermath.start(config) } catch { exit(10) }
            let first = [Int32(TaskPriority.low.rawValue), Int32(TaskPriority.high.rawValue)].sorted()
            guard poolTags() == first else { exit(11) }
            guard let work = try? Aftermath.watchWork(named: "job", threshold: .seconds(5)) else { exit(12) }
            config.concurrencyPoolPriorities = [.medium]
            do { try Aftermath.start(config) } catch { exit(13) }
            guard poolTags() == [Int32(TaskPriority.medium.rawValue)] else { exit(14) }
            // The work target is untagged and still watched: its unit begins.
            let unit = work.begin()
            guard unit.isWatched else { exit(15) }
            unit.end()
            exit(0)
        }
    }
    #endif
}
