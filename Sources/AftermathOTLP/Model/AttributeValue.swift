/// The value of an ``Attribute`` or of a log record's body: an OpenTelemetry `AnyValue`.
///
/// Literals build values directly: `"text"`, `42`, `true`, `1.5`.
public enum AttributeValue: Sendable, Hashable {
    /// A UTF-8 string (`stringValue`).
    case string(String)
    /// A boolean (`boolValue`).
    case bool(Bool)
    /// A signed 64-bit integer (`intValue`, a decimal string in OTLP/JSON).
    case int(Int64)
    /// A 64-bit float (`doubleValue`).
    case double(Double)
    /// Raw bytes (`bytesValue`, base64 in OTLP/JSON).
    case bytes([UInt8])
    /// An ordered list of values (`arrayValue`).
    case array([AttributeValue])
    /// An ordered list of key-value pairs (`kvlistValue`).
    case kvlist([Attribute])

    /// The string, if this is a `.string`.
    public var stringValue: String? {
        if case .string(let value) = self { value } else { nil }
    }

    /// The integer, if this is an `.int`.
    public var intValue: Int64? {
        if case .int(let value) = self { value } else { nil }
    }

    /// The boolean, if this is a `.bool`.
    public var boolValue: Bool? {
        if case .bool(let value) = self { value } else { nil }
    }

    /// The float, if this is a `.double`.
    public var doubleValue: Double? {
        if case .double(let value) = self { value } else { nil }
    }
}

extension AttributeValue: ExpressibleByStringLiteral {
    /// Creates a `.string` value from a string literal.
    public init(stringLiteral value: String) { self = .string(value) }
}

extension AttributeValue: ExpressibleByIntegerLiteral {
    /// Creates an `.int` value from an integer literal.
    public init(integerLiteral value: Int64) { self = .int(value) }
}

extension AttributeValue: ExpressibleByBooleanLiteral {
    /// Creates a `.bool` value from a boolean literal.
    public init(booleanLiteral value: Bool) { self = .bool(value) }
}

extension AttributeValue: ExpressibleByFloatLiteral {
    /// Creates a `.double` value from a floating-point literal.
    public init(floatLiteral value: Double) { self = .double(value) }
}
