import AftermathOTLP
/// A report an earlier run (or this one) left on disk, turned into its log record.
package struct PendingReport: Sendable {
    /// What kind of report this is.
    package enum Kind: String, Sendable, Hashable {
        case crash, hang, abnormalExit = "abnormal_exit", error
    }

    /// Its kind.
    package var kind: Kind
    /// The file it came from; deleted once an exporter acknowledges the record.
    package var path: String
    /// The record to export.
    package var record: LogRecord
    /// The decoded crash, for crash reports.
    package var crash: CrashReport?
}
