/// A report an earlier run (or this one) left on disk, turned into its log record.
public struct PendingReport: Sendable {
    /// What kind of report this is.
    public enum Kind: String, Sendable, Hashable {
        case crash, hang, abnormalExit = "abnormal_exit", error
    }

    /// Its kind.
    public var kind: Kind
    /// The file it came from; deleted once an exporter acknowledges the record.
    public var path: String
    /// The record to export.
    public var record: LogRecord
    /// The decoded crash, for crash reports.
    public var crash: CrashReport?
}
