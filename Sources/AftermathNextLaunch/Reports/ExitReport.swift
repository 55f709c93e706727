import AftermathOTLP
import Foundation

/// A run that ended without a crash report or a normal exit, as the next launch reports it:
/// an `app.abnormal_exit` record.
package struct ExitReport: Sendable, Hashable {
    /// The run's context; its session is the one the run was in at its last update.
    package var context: ReportContext
    /// apsio.exit.reason.
    package var reason: ExitReason
    /// apsio.exit.source.
    package var source: ExitSource
    /// apsio.exit.foreground: whether the run was in the foreground at its last update.
    package var foreground: Bool
    /// apsio.exit.evidence: a short text saying what the reason rests on.
    package var evidence: String
    /// The last time the run was seen alive, nanoseconds since the Unix epoch: the record's time.
    package var timeUnixNano: UInt64
    /// session.previous_id, when the run had started a new session.
    package var previousSessionID: UUID?
    /// app.screen.name at the run's last update.
    package var screen: String?

    /// The `app.abnormal_exit` record (severity FATAL).
    package func record(observedTimeUnixNano: UInt64) -> LogRecord {
        var a: [Attribute] = [
            Attribute("apsio.exit.reason", .string(reason.rawValue)),
            Attribute("apsio.exit.source", .string(source.rawValue)),
            Attribute("apsio.exit.foreground", .bool(foreground)),
            Attribute("apsio.exit.evidence", .string(evidence)),
            Attribute("log.record.uid", .string(RecordMapper.recordUID(timeUnixNano: timeUnixNano, id: context.runID))),
        ]
        a += RecordMapper.runAttributes(context)
        if let previousSessionID { a.append(Attribute("session.previous_id", .string(previousSessionID.lowercased))) }
        if let screen { a.append(Attribute("app.screen.name", .string(screen))) }
        a.append(Attribute("process.pid", .int(context.pid)))
        return LogRecord(
            timeUnixNano: timeUnixNano, observedTimeUnixNano: observedTimeUnixNano,
            severityNumber: .fatal, eventName: "app.abnormal_exit", attributes: a)
    }
}
