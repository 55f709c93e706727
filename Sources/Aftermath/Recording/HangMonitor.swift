import AftermathNextLaunch
import CSignalShim
import Dispatch
import Foundation
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
        options.notify = { event in HangMonitor.handle(event) }
        options.thread_later = 1  // started by Aftermath.startBackgroundThreads()
        options.other_threads = configuration.hangOtherThreads ? 1 : 0
        var error = [CChar](repeating: 0, count: 256)
        let status = directory.hangs.withCString { dir in
            options.hang_directory = dir
            return aft_watchdog_start(&options, &error, error.count)
        }
        guard status == 0 else {
            let message = String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            throw .hangWatchdogNotStarted(message)
        }
    }

    /// Called on the watchdog thread, only while the watched thread is known to run.
    static func handle(_ event: UInt32) {
        switch event {
        case UInt32(AFT_WATCHDOG_EVENT_PING):
            DispatchQueue.main.async { aft_watchdog_ping_ran() }
        case UInt32(AFT_WATCHDOG_EVENT_HANG_FINISHED):
            reportQueue.async { reportFinishedHangs() }
        default:
            break
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
        do {
            try running.configuration.exporter.export(batch)
        } catch {
            return 0
        }
        for path in paths { unlink(path) }
        return records.count
    }
}
