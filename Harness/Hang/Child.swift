import Aftermath
import AftermathNextLaunch
import AftermathOTLP
import AftermathTesting
import AftermathSymbolication
import HarnessSupport
import CSignalShim
import Dispatch
import CHarnessFaults
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The Swift runtime's entry that an `async` main ends in: runs the main actor's queue.
@_silgen_name("swift_task_asyncMainDrainQueue")
func asyncMainDrainQueue() -> Never

/// A child process: starts Aftermath on a reports directory, runs one scenario on its main
/// thread, then prints what its exporter received (RECORD lines) and exits.
enum Child {
    static let exporter = InMemoryExporter()

    static func run(_ scenario: String, directory: String) -> Never {
        var config = Aftermath.Configuration(
            serviceName: "hang-harness", serviceVersion: "1.0",
            exporter: exporter, reportsDirectory: directory,
            deliverPendingReportsSynchronously: true)
        if scenario == "collect" { config.hangHeartbeat = .off }
        // An exporter whose hand-off takes a while (a file outbox, a slow collector): the parent
        // ends the process in the middle of it.
        if scenario == "termexport" { config.exporter = SlowExporter(exporter) }
        if scenario.hasPrefix("srv-") { ServerChild.configure(&config, scenario) }
        if scenario == "heartbeat" { config.hangHeartbeat = .manual }
        // As a new app starts: earlier reports are delivered in the background.
        if scenario == "first" { config.deliverPendingReportsSynchronously = false }
        // The app owns SIGURG (as Go-style runtimes and some I/O libraries do).
        if scenario == "urgowner" { signal(SIGURG) { _ in } }
        do {
            try Aftermath.start(config)
        } catch {
            emit("ERROR start: \(error)")
            exit(2)
        }
        emit("SESSION \(Aftermath.sessionID?.uuidString.lowercased() ?? "")")
        if scenario.hasPrefix("srv-") { ServerChild.run(scenario) }
        switch scenario {
        case "collect":
            printRecords()
            exit(0)
        case "heartbeat":
            ownLoop()
        case "dispatchmain", "dmbusy", "dmsleep":
            whenArmed { DispatchQueue.main.async { body(scenario) } }
            dispatchMain()
        case "asyncbusy", "asyncblock", "asyncsleep":
            // What an `async` main does: the main task on the main actor, then the runtime
            // drains the main queue (dispatchMain(): worker threads serve it, all signals blocked).
            whenArmed { Task { @MainActor in body(scenario) } }
            asyncMainDrainQueue()
        case "first":
            // The first main-queue job after start hangs; nothing waits for the watchdog.
            DispatchQueue.main.async { body(scenario) }
            RunLoop.main.run()
            exit(3)
        case "urgowner":
            whenArmed { DispatchQueue.main.async { body(scenario) } }
            RunLoop.main.run()
            exit(3)
        default:
            whenArmed { DispatchQueue.main.async { body(scenario) } }
            RunLoop.main.run()
            exit(3)
        }
    }

    /// The scenario's work on the main queue.
    static func body(_ scenario: String) {
        switch scenario {
        case "termexport":
            Blocking.hangHarnessWaitOnSemaphore(seconds: 1.0)
            finish(expecting: 1)
        case "live1s", "tracer", "dispatchmain":
            emit("BLOCKING")
            Blocking.hangHarnessWaitOnSemaphore(seconds: 1.0)
            finish(expecting: scenario == "tracer" ? 0 : 1)
        case "kill":
            emit("BLOCKING")
            Blocking.hangHarnessBlockForever()
        case "lock":
            Blocking.hangHarnessLockWait(seconds: 1.0)
            finish(expecting: 1)
        case "idlepoll":
            // Idle in the run loop for 1.5 s first (its wait learned from the 6th ping on, its
            // pings skipped), then a job that waits in a ppoll of its own: a hang all the same.
            DispatchQueue.main.asyncAfter(deadline: .now() + 1.5) {
                var stats = aft_watchdog_stats()
                aft_watchdog_get_stats(&stats)
                emit("IDLE skips=\(stats.idle_skips) pings=\(stats.pings)")
                Blocking.hangHarnessPoll(seconds: 1.0)
                finish(expecting: 1)
            }
        case "sleep", "dmsleep", "asyncsleep":
            Blocking.hangHarnessSleep(seconds: 1.0)
            finish(expecting: 1)
        case "busy", "dmbusy", "asyncbusy", "urgowner":
            Blocking.hangHarnessBusyLoop(seconds: 1.0)
            finish(expecting: 1)
        case "first":
            Blocking.hangHarnessWaitOnSemaphore(seconds: 1.5)
            finish(expecting: 1)
        case "loaderlock":
            // The process's first hang, inside the loader's lock: libunwind (loaded at its first
            // use) cannot be loaded for the capture. Once the lock is free it is, for later ones.
            emit("BLOCKING")
            hang_harness_in_loader_lock(1000)
            var loaded = false
            for _ in 0..<100 where !loaded {
                let maps = (try? String(contentsOfFile: "/proc/self/maps", encoding: .utf8)) ?? ""
                loaded = maps.contains("/libunwind.so.8")
                if !loaded { usleep(10_000) }
            }
            emit(loaded ? "LIBUNWIND loaded" : "LIBUNWIND missing")
            finish(expecting: 1)
        case "asyncblock":
            Blocking.hangHarnessWaitOnSemaphore(seconds: 1.0)
            finish(expecting: 1)
        case "stall200":
            stall(remaining: 5)
        case "sigstop":
            // From the main queue: start queued its first ping before this, so the main thread
            // is watched (ticked) when the parent stops the process, whatever else is slow.
            DispatchQueue.main.async { emit("READY") }
            DispatchQueue.main.asyncAfter(deadline: .now() + 4.0) { finish(expecting: 0) }
        default:
            emit("ERROR unknown scenario \(scenario)")
            exit(2)
        }
    }

    /// Five 200 ms stalls, 300 ms apart, with the run loop running in between.
    static func stall(remaining: Int) {
        guard remaining > 0 else { return finish(expecting: 0) }
        Blocking.hangHarnessWaitOnSemaphore(seconds: 0.2)
        DispatchQueue.main.asyncAfter(deadline: .now() + 0.3) { stall(remaining: remaining - 1) }
    }

    /// An app with its own loop: a heartbeat every 10 ms, one 1 s block in the middle.
    static func ownLoop() -> Never {
        for _ in 0..<50 {
            Aftermath.heartbeat()
            usleep(10_000)
        }
        Blocking.hangHarnessWaitOnSemaphore(seconds: 1.0)
        let deadline = Blocking.monotonicSeconds() + 3
        while exporter.records.isEmpty && Blocking.monotonicSeconds() < deadline {
            Aftermath.heartbeat()
            usleep(10_000)
        }
        printRecords()
        exit(0)
    }

    /// Runs work once the watchdog is armed (its first ping ran), without blocking the main queue.
    static func whenArmed(_ work: @escaping @Sendable () -> Void) {
        Thread {
            var stats = aft_watchdog_stats()
            let deadline = Blocking.monotonicSeconds() + 5
            repeat {
                usleep(20_000)
                aft_watchdog_get_stats(&stats)
            } while stats.watched_tid == 0 && Blocking.monotonicSeconds() < deadline
            usleep(150_000)
            work()
        }.start()
    }

    /// Waits (off the main thread) for the expected records, prints them and exits.
    static func finish(expecting count: Int, within seconds: Double? = nil) {
        Thread {
            let deadline = Blocking.monotonicSeconds() + (seconds ?? (count == 0 ? 1.5 : 4))
            while Blocking.monotonicSeconds() < deadline {
                if count > 0 && exporter.records.count >= count { break }
                usleep(20_000)
            }
            printRecords()
            exit(0)
        }.start()
    }

    static func printRecords() {
        var stats = aft_watchdog_stats()
        aft_watchdog_get_stats(&stats)
        emit(
            "STATS hangs=\(stats.hangs) ignored=\(stats.ignored_stretches) late=\(stats.late_ticks) wakeups=\(stats.wakeups) latency_ms=\(stats.last_detection_latency_ns / 1_000_000) pause_us=\(stats.last_capture_pause_ns / 1000) idle_skips=\(stats.idle_skips)"
        )
        RecordLine.emit(exporter.batches)
        // SIGPROF is the app's, or nobody's: a hang's capture that borrowed it gives it back.
        var now = sigaction()
        sigaction(SIGPROF, nil, &now)
        emit(
            now.sa_flags & SA_SIGINFO == 0 && now.__sigaction_handler.sa_handler == nil
                ? "SIGPROF default" : "SIGPROF handled")
    }

    /// One line on stdout, written at once (stdout is a pipe).
    static func emit(_ line: String) {
        writeNow(line + "\n")
    }
}

/// Says on stdout that a batch is being handed over (each record's uid), then takes 100 ms
/// before it acknowledges it: the SIGTERM the parent sends at once comes in the middle, and
/// the termination's 500 ms wait for the hand-off keeps a margin on a loaded machine (with
/// 300 ms, one CI run saw the process end first and the hang sent again).
final class SlowExporter: LogExporter, @unchecked Sendable {
    let base: InMemoryExporter
    init(_ base: InMemoryExporter) { self.base = base }

    func export(_ batch: LogBatch) throws {
        for record in batch.records where record.eventName == "apsio.hang" {
            Child.emit("EXPORTING \(record[text: "log.record.uid"] ?? "")")
        }
        usleep(100_000)
        try base.export(batch)
    }
}
