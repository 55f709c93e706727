/// The OpenTelemetry resource of a batch: attributes describing the reporting process,
/// such as `service.name`, `service.version` and `os.name`.
public struct Resource: Sendable, Hashable {
    /// The resource's attributes, in order.
    public var attributes: [Attribute]

    /// Creates a resource with `attributes`.
    public init(attributes: [Attribute] = []) {
        self.attributes = attributes
    }
}
