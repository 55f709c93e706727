import Aftermath
import AftermathNextLaunch
import AftermathOTLP
import AftermathTesting
import CSignalShim
import CHarnessFaults
import TestSupport
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A real hang in a child process (an exit test): the watchdog sees a thread that stops beating,
/// captures it, and the finished hang is exported in the same run and its file deleted.
@Suite("Live hangs")
struct HangLiveTests {
    @inline(never)
    static func blockWithoutHeartbeat() {
        usleep(1_500_000)
    }

    /// The child's body: exits 0 when the record is as a user would check it.
    static func liveHangInThisRun() -> Int32 {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("aftermath-hang-\(UUID().uuidString)")
            .path
        let exporter = InMemoryExporter()
        var config = Aftermath.Configuration(
            serviceName: "hang-test", serviceVersion: "3.1", exporter: exporter,
            reportsDirectory: root, deliverPendingReportsSynchronously: true)
        config.hangHeartbeat = .manual
        do { try Aftermath.start(config) } catch { return 10 }
        // The hang happens in a session the app started: its record names the one before.
        let firstSession = Aftermath.sessionID?.lowercased ?? "-"
        _ = Aftermath.startNewSession()
        for _ in 0..<30 {
            Aftermath.heartbeat()
            usleep(10_000)
        }
        blockWithoutHeartbeat()
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline, !exporter.records.contains(where: { $0.eventName == "apsio.hang" }) {
            Aftermath.heartbeat()
            usleep(10_000)
        }
        guard let r = exporter.records.first(where: { $0.eventName == "apsio.hang" }) else { return 11 }
        guard r[attribute: "apsio.hang.source"] == .string("live"),
            r[attribute: "apsio.hang.unfinished"] == nil,
            let duration = r[attribute: "apsio.hang.duration"]?.intValue, duration >= 250,
            r[attribute: "session.id"] == .string(Aftermath.sessionID?.lowercased ?? "-"),
            r[attribute: "service.version"] == .string("3.1"),
            r[attribute: "apsio.hang.thread_state"] == .string("sleeping"),
            r[attribute: "exception.stacktrace"]?.stringValue?.isEmpty == false
        else { return 12 }
        guard r[attribute: "session.previous_id"] == .string(firstSession) else { return 14 }
        let left = (try? FileManager.default.contentsOfDirectory(atPath: root + "/hangs")) ?? []
        guard left.isEmpty else { return 13 }
        return 0
    }

    #if compiler(>=6.2)  // exit tests (#expect(processExitsWith:)) need Swift 6.2
    @Test(
        "A thread blocked past the threshold is reported live, once, with its session and the one before, and its file deleted"
    )
    func liveHang() async {
        await #expect(processExitsWith: .success) {
            exit(HangLiveTests.liveHangInThisRun())
        }
    }

    @Test("Without any heartbeat the watchdog never arms: no hang, no file")
    func neverArmed() async {
        await #expect(processExitsWith: .success) {
            let root = FileManager.default.temporaryDirectory.appendingPathComponent(
                "aftermath-hang-\(UUID().uuidString)"
            ).path
            var config = Aftermath.Configuration(
                serviceName: "hang-test", serviceVersion: "3.1", exporter: InMemoryExporter(),
                reportsDirectory: root, deliverPendingReportsSynchronously: true)
            config.hangHeartbeat = .manual
            config.watchConcurrencyPool = false  // the main thread alone: nothing to wake for
            do { try Aftermath.start(config) } catch { exit(10) }
            usleep(800_000)
            var stats = aft_watchdog_stats()
            aft_watchdog_get_stats(&stats)
            let left = (try? FileManager.default.contentsOfDirectory(atPath: root + "/hangs")) ?? []
            exit(stats.hangs == 0 && stats.watched_tid == 0 && left.isEmpty && stats.wakeups <= 1 ? 0 : 1)
        }
    }

    @Test("Blocking between pauseHangDetection() and resumeHangDetection() is no hang, and costs no wakeups")
    func paused() async {
        await #expect(processExitsWith: .success) {
            let root = FileManager.default.temporaryDirectory.appendingPathComponent(
                "aftermath-hang-\(UUID().uuidString)"
            ).path
            var config = Aftermath.Configuration(
                serviceName: "hang-test", serviceVersion: "3.1", exporter: InMemoryExporter(),
                reportsDirectory: root, deliverPendingReportsSynchronously: true)
            config.hangHeartbeat = .manual
            config.watchConcurrencyPool = false  // the main thread alone: nothing to wake for
            do { try Aftermath.start(config) } catch { exit(10) }
            for _ in 0..<20 {
                Aftermath.heartbeat()
                usleep(10_000)
            }
            Aftermath.pauseHangDetection()
            var before = aft_watchdog_stats()
            aft_watchdog_get_stats(&before)
            usleep(1_000_000)
            var during = aft_watchdog_stats()
            aft_watchdog_get_stats(&during)
            Aftermath.resumeHangDetection()
            for _ in 0..<50 {
                Aftermath.heartbeat()
                usleep(10_000)
            }
            var after = aft_watchdog_stats()
            aft_watchdog_get_stats(&after)
            exit(after.hangs == 0 && during.wakeups - before.wakeups <= 1 ? 0 : 1)
        }
    }
    #endif
}
