import AftermathNextLaunch
import Synchronization

/// Adds to the first batch it exports one `apsio.records_dropped` record counting the records
/// that caps dropped since the last delivery (handled errors beyond
/// ``Aftermath/Configuration/maxPendingErrors``); remembers whether a batch carrying it was
/// acknowledged, so an unsent count is kept for the next delivery.
final class DropReportingExporter: LogExporter {
    let base: any LogExporter
    let droppedErrors: Int
    private let acknowledged = Mutex(false)

    init(base: any LogExporter, droppedErrors: Int) {
        self.base = base
        self.droppedErrors = droppedErrors
    }

    var delivered: Bool { acknowledged.withLock { $0 } }

    func export(_ batch: LogBatch) throws {
        guard !delivered else { return try base.export(batch) }
        var counted = batch
        counted.records.append(Self.record(droppedErrors: droppedErrors))
        try base.export(counted)
        acknowledged.withLock { $0 = true }
    }

    static func record(droppedErrors: Int) -> LogRecord {
        let now = Clock.realtimeNanoseconds()
        return LogRecord(
            timeUnixNano: now, severityNumber: .warn, eventName: "apsio.records_dropped",
            body: .string("\(droppedErrors) handled errors were not recorded: more than maxPendingErrors were waiting"),
            attributes: [
                Attribute("apsio.dropped.count", .int(Int64(droppedErrors))),
                Attribute("apsio.dropped.reason", "max_pending_errors"),
            ])
    }
}
