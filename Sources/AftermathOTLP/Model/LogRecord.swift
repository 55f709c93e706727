/// One OpenTelemetry log record: a crash, a hang, an abnormal exit or a handled error.
public struct LogRecord: Sendable, Hashable {
    /// When the event happened, in nanoseconds since the Unix epoch.
    public var timeUnixNano: UInt64
    /// When the SDK observed the event (for a crash, the next launch), in nanoseconds since the Unix epoch.
    public var observedTimeUnixNano: UInt64
    /// The severity, such as ``SeverityNumber/fatal`` for a crash.
    public var severityNumber: SeverityNumber
    /// The severity's text; omitted from the output when `nil`.
    public var severityText: String?
    /// The event name (LogRecord field 12), such as `app.crash`; omitted when `nil`.
    public var eventName: String?
    /// The record's body; omitted when `nil`.
    public var body: AttributeValue?
    /// The record's attributes, in order.
    public var attributes: [Attribute]

    /// Creates a record.
    ///
    /// - Parameters:
    ///   - observedTimeUnixNano: defaults to `timeUnixNano`.
    ///   - severityText: defaults to `severityNumber.text` (set the property to `nil` to omit it).
    public init(
        timeUnixNano: UInt64,
        observedTimeUnixNano: UInt64? = nil,
        severityNumber: SeverityNumber = .info,
        severityText: String? = nil,
        eventName: String? = nil,
        body: AttributeValue? = nil,
        attributes: [Attribute] = []
    ) {
        self.timeUnixNano = timeUnixNano
        self.observedTimeUnixNano = observedTimeUnixNano ?? timeUnixNano
        self.severityNumber = severityNumber
        self.severityText = severityText ?? severityNumber.text
        self.eventName = eventName
        self.body = body
        self.attributes = attributes
    }

    /// The value of the first attribute named `key`, or `nil`.
    public subscript(attribute key: String) -> AttributeValue? {
        attributes.first { $0.key == key }?.value
    }
}
