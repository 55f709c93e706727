/// Records sent together: one `ExportLogsServiceRequest` holding one `ResourceLogs`
/// with one `ScopeLogs`.
public struct LogBatch: Sendable, Hashable {
    /// The resource describing the reporting process.
    public var resource: Resource
    /// The instrumentation scope's name, such as `aftermath`.
    public var scopeName: String
    /// The instrumentation scope's version.
    public var scopeVersion: String
    /// The records, in order.
    public var records: [LogRecord]

    /// Creates a batch.
    public init(resource: Resource, scopeName: String, scopeVersion: String, records: [LogRecord]) {
        self.resource = resource
        self.scopeName = scopeName
        self.scopeVersion = scopeVersion
        self.records = records
    }
}
