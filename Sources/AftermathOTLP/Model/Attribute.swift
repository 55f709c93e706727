/// A key-value pair: an OpenTelemetry `KeyValue`, such as `Attribute("service.name", "shop")`.
public struct Attribute: Sendable, Hashable {
    /// The attribute's name, such as `exception.type`.
    public var key: String
    /// The attribute's value.
    public var value: AttributeValue

    /// Creates an attribute named `key` with `value`.
    public init(_ key: String, _ value: AttributeValue) {
        self.key = key
        self.value = value
    }
}
