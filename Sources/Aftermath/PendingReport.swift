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

/// A file that was not reported, and why. Bad files are moved to rejected/ with a
/// `.reason` file beside them; they never stop the other reports.
public struct SkippedFile: Sendable, Hashable {
    /// Where the file was found.
    public var path: String
    /// Why it was skipped.
    public var reason: String
    /// Where it was moved, when it was moved aside.
    public var movedTo: String?
}
