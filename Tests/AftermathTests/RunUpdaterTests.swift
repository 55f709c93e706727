import Aftermath
import AftermathNextLaunch
import AftermathTesting
import CSignalShim
import TestSupport
import Foundation
import Testing

/// Who keeps the run record's live block current once start is done: the hang watchdog's
/// pinger between its pings, or, without one, an updater thread of its own.
@Suite("Run record updates")
struct RunUpdaterTests {
    /// The names of the process's threads that are Aftermath's.
    static func aftermathThreads() -> Set<String> {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        return Set(
            tasks.compactMap {
                (try? String(contentsOfFile: "/proc/self/task/\($0)/comm", encoding: .utf8))?
                    .trimmingCharacters(in: .whitespacesAndNewlines)
            }.filter { $0.hasPrefix("aftermath.") })
    }

    /// How many periodic updates this process's run file records (its one `.run` file).
    static func updates(in directory: String) -> UInt64? {
        let runs = directory + "/runs"
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: runs)) ?? []).filter {
            $0.hasSuffix(".run")
        }
        guard names.count == 1, let data = FileManager.default.contents(atPath: runs + "/" + names[0]),
            let run = try? RunFile.decode([UInt8](data))
        else { return nil }
        return run.live?.update_count
    }

    /// Whether the run file gains at least 3 updates within a second (the interval is 50 ms).
    static func keepsUpdating(_ directory: String) -> Bool {
        guard let before = updates(in: directory) else { return false }
        for _ in 0..<100 {
            usleep(10_000)
            if let now = updates(in: directory), now >= before + 3 { return true }
        }
        return false
    }

    static func start(_ tag: String, heartbeat: HangHeartbeat) -> String {
        let directory = TestSupport.childDirectory(tag)
        var config = Aftermath.Configuration(
            serviceName: tag, serviceVersion: "1", exporter: InMemoryExporter(), reportsDirectory: directory)
        config.runUpdateInterval = .milliseconds(50)
        config.hangHeartbeat = heartbeat
        config.watchConcurrencyPool = false
        do { try Aftermath.start(config) } catch { exit(10) }
        for _ in 0..<500 where Aftermath.lastDelivery == nil { usleep(10_000) }
        guard Aftermath.lastDelivery != nil else { exit(11) }
        return directory
    }

    #if compiler(>=6.2)  // exit tests (#expect(processExitsWith:)) need Swift 6.2
    @Test(
        "With hang detection on, the pinger updates the run record: no thread of its own; one takes over when the watchdog stops"
    )
    func pingerHostsTheUpdates() async {
        await #expect(processExitsWith: .success) {
            let directory = RunUpdaterTests.start("run-hosted", heartbeat: .manual)
            let threads = RunUpdaterTests.aftermathThreads()
            guard threads.contains("aftermath.ping"), !threads.contains("aftermath.run") else { exit(12) }
            guard RunUpdaterTests.keepsUpdating(directory) else { exit(13) }
            // The run outlives the watchdog: its updates go on, on a thread of their own.
            aft_watchdog_stop()
            let after = RunUpdaterTests.aftermathThreads()
            guard !after.contains("aftermath.ping") else { exit(14) }
            guard RunUpdaterTests.keepsUpdating(directory) else { exit(15) }
            guard RunUpdaterTests.aftermathThreads().contains("aftermath.run") else { exit(16) }
            exit(0)
        }
    }

    @Test("With hang detection off, an updater thread updates the run record")
    func updaterThreadWithoutWatchdog() async {
        await #expect(processExitsWith: .success) {
            let directory = RunUpdaterTests.start("run-own-thread", heartbeat: .off)
            let threads = RunUpdaterTests.aftermathThreads()
            guard threads.contains("aftermath.run"), !threads.contains("aftermath.ping") else { exit(12) }
            exit(RunUpdaterTests.keepsUpdating(directory) ? 0 : 13)
        }
    }
    #endif
}
