/// A symbolicated stack frame.
public struct SymbolicatedFrame: Sendable, Hashable {
    /// The raw (possibly mangled) symbol name.
    public var function: String
    /// Distance of the original address from the start of `function`.
    public var offset: UInt64
    /// `function` demangled if it is a Swift symbol, otherwise equal to `function`.
    public var demangled: String

    public init(function: String, offset: UInt64, demangled: String) {
        self.function = function
        self.offset = offset
        self.demangled = demangled
    }
}
