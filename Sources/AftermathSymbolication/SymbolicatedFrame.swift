import AftermathNextLaunch
/// A symbolicated stack frame.
package struct SymbolicatedFrame: Sendable, Hashable {
    /// The raw (possibly mangled) symbol name.
    package var function: String
    /// Distance of the original address from the start of `function`.
    package var offset: UInt64
    /// `function` demangled if it is a Swift symbol, otherwise equal to `function`.
    package var demangled: String

    package init(function: String, offset: UInt64, demangled: String) {
        self.function = function
        self.offset = offset
        self.demangled = demangled
    }
}
