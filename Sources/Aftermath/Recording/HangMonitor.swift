import AftermathNextLaunch
import CSignalShim
import Dispatch
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Runs the C hang watchdog (CSignalShim/hang/watchdog.c) for this process and reports its hangs in
/// this run: when a hang finishes, its file is exported as a live `apsio.hang` record and
/// deleted once the exporter acknowledged it. A refused export keeps the file; the next finished
/// hang, or the next launch, sends it again.
enum HangMonitor {
    /// The default capture signal, 0: the watchdog takes the highest real-time signal that
    /// nobody handles at start (SIGURG when there is none).
    static let defaultCaptureSignal: Int32 = 0

    /// Exports of finished hangs run here, one at a time, never on the watchdog thread.
    static let reportQueue = DispatchQueue(label: "dev.apsio.aftermath.hangs", qos: .utility)

    /// How each pinged target other than the main queue runs a job: an event loop's `schedule`,
    /// the pool's probe.
    static let schedules = Mutex(PingSchedules())
    /// Watches the Swift concurrency pool at each configured priority: a probe job every
    /// 100 ms, a hang when one has not started within the threshold. A probe's target carries
    /// its task priority as its tag (set before its first ping), and a later start removes the
    /// earlier start's probes by it: no table of Swift's, whose array and lock the runtime
    /// would set up at every start.
    static func watchPool(_ configuration: Aftermath.Configuration) {
        var earlier = aft_watch_next_tagged(0)
        while earlier > 0 {
            aft_watch_remove(earlier)
            earlier = aft_watch_next_tagged(earlier)
        }
        guard configuration.watchConcurrencyPool else { return }
        let threshold = max(1, configuration.concurrencyPoolThreshold.clampedMilliseconds)
        func probe(_ priority: UInt8) {
            _ = aft_watch_add_tagged(
                AFT_HANG_KIND_CONCURRENCY_POOL, "concurrency-pool." + priorityName(TaskPriority(rawValue: priority)),
                threshold, Int32(priority))
        }
        // The default without an array: the first [UInt8] of a launch has the runtime build
        // its type by name.
        guard let configured = configuration.poolPriorityValues else { return probe(TaskPriority.medium.rawValue) }
        let priorities = configured.sorted()
        for (index, priority) in priorities.enumerated() where index == 0 || priorities[index - 1] != priority {
            probe(priority)
        }
    }

    static func priorityName(_ p: TaskPriority) -> String {
        // On raw values: a switch over TaskPriority's cases matches through its Equatable
        // conformance, whose witness tables the runtime builds at start's first use.
        switch p.rawValue {
        case TaskPriority.high.rawValue: return "high"
        case TaskPriority.medium.rawValue: return "medium"
        case TaskPriority.low.rawValue: return "low"
        case TaskPriority.background.rawValue: return "background"
        default: return String(p.rawValue)
        }
    }

    /// Starts (or restarts, or with ``HangHeartbeat/off`` stops) the watchdog.
    static func start(_ configuration: Aftermath.Configuration, directory: ReportDirectory) throws(Aftermath.StartError)
    {
        guard configuration.hangHeartbeat != .off else {
            aft_watchdog_stop()
            return
        }
        var options = aft_watchdog_options()
        options.threshold_ms = max(1, configuration.hangThreshold.clampedMilliseconds)
        options.capture_signal = configuration.hangCaptureSignal
        options.heartbeat_mode =
            configuration.hangHeartbeat == .manual ? AFT_HEARTBEAT_MANUAL : AFT_HEARTBEAT_MAIN_QUEUE
        options.notify = { event, target in HangMonitor.handle(event, target: target) }
        options.thread_later = 1  // started by Aftermath.startBackgroundThreads()
        options.other_threads = configuration.hangOtherThreads ? 1 : 0
        let (status, message) = StartHelpers.withErrorMessage { error, capacity in
            directory.hangs.withCString { dir in
                options.hang_directory = dir
                return aft_watchdog_start(&options, error, capacity)
            }
        }
        guard status == 0 else { throw .hangWatchdogNotStarted(message) }
        // The pool's targets: by Aftermath.startBackgroundThreads(), before the watchdog's thread.
    }

    /// The main queue's ping, one block for every ping. Not a closure written at the call: one
    /// passed to `DispatchQueue.main.async` is taken as `@MainActor`, and Swift 6 checks such a
    /// closure's executor as it starts (the concurrency runtime's pages, at the first ping of
    /// every launch), where this only marks the ping as run.
    static let mainPing: @Sendable @convention(block) () -> Void = { aft_watchdog_ping_ran() }

    /// Called on the pinger thread (never the watchdog's), and by start for the first ping.
    static func handle(_ event: UInt32, target: Int32) {
        switch event {
        case UInt32(AFT_WATCHDOG_EVENT_PING) where target == 0:
            DispatchQueue.main.async(execute: mainPing)
        case UInt32(AFT_WATCHDOG_EVENT_PING):
            let priority = aft_watch_tag(target)  // a pool's probe: its task priority
            if priority >= 0 {
                probePool(target, priority: priority)
                return
            }
            guard let schedule = schedules.withLock({ $0[target] }) else { return }
            schedule { aft_watch_ping_ran(target) }
        case UInt32(AFT_WATCHDOG_EVENT_HANG_FINISHED):
            // A process that hung once may again: later captures get the resident helper,
            // started here on the pinger, at the app's priority. Started from the report queue
            // (utility QoS), it and its thread ran at nice 2, so that a hung thread's capture
            // waiting on it yielded to every other thread on its CPU.
            aft_unwind_resident_start()
            reportQueue.async { reportFinishedHangs() }
        default:
            break
        }
    }

    /// One probe job of the pool at priority (a raw value). A function of its own: where it was
    /// inline, every call of ``handle(_:target:)``, the main queue's first ping at start
    /// included, had the runtime build its optional priority's metadata by name.
    @inline(never)
    static func probePool(_ target: Int32, priority: Int32) {
        Task.detached(priority: TaskPriority(rawValue: UInt8(truncatingIfNeeded: priority))) {
            aft_watch_ping_ran(target)
        }
    }

    /// Exports this run's finished hangs in one batch and deletes the acknowledged files.
    /// Returns how many were acknowledged.
    @discardableResult
    static func reportFinishedHangs() -> Int {
        guard let running = Aftermath.state.withLock({ $0 }) else { return 0 }
        let dir = running.directory.hangs
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? [])
            .filter { $0.hasSuffix(".hang") && !$0.hasPrefix(".") }
            .sorted()
        let observed = Clock.realtimeNanoseconds()
        var paths: [String] = []
        var records: [LogRecord] = []
        for name in names {
            let path = (dir as NSString).appendingPathComponent(name)
            guard let file = try? ReportFile.decode(FileReader.read(path)),
                let hang = try? HangReport(file: file),
                hang.context.runID == running.context.runID, hang.isFinished
            else { continue }
            paths.append(path)
            records.append(HangRecordMapper.hang(hang, observedTimeUnixNano: observed))
        }
        guard !records.isEmpty else { return 0 }
        let batch = LogBatch(
            resource: Aftermath.resource(for: running.configuration),
            scopeName: SDK.scopeName, scopeVersion: SDK.version,
            records: records)
        // A termination signal ending the process waits for this hand-off (or refuses it):
        // a hang is exported here or at the next launch, never both.
        guard aft_export_begin() != 0 else { return 0 }
        defer { aft_export_end() }
        do {
            try running.configuration.exporter.export(batch)
        } catch {
            return 0
        }
        for path in paths { unlink(path) }
        return records.count
    }
}

/// How each pinged target runs a job, by target handle. A list: a Dictionary keyed by Int32
/// would scan every image's conformance records at its first use (its key's Hashable, looked up
/// at run time), a few tenths of a millisecond of every launch.
struct PingSchedules: Sendable {
    typealias Schedule = @Sendable (@escaping @Sendable () -> Void) -> Void
    private var entries: [(target: Int32, schedule: Schedule)] = []

    subscript(target: Int32) -> Schedule? {
        get { entries.first { $0.target == target }?.schedule }
        set {
            entries.removeAll { $0.target == target }
            if let newValue { entries.append((target, newValue)) }
        }
    }

    /// Drops the schedules of targets that ended without a stop (a loop shut down): their
    /// handles name no target again.
    mutating func removeEnded() {
        entries.removeAll { aft_watch_active($0.target) == 0 }
    }

    @discardableResult
    mutating func removeValue(forKey target: Int32) -> Schedule? {
        defer { self[target] = nil }
        return self[target]
    }
}
