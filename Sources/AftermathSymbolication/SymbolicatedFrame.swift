import AftermathNextLaunch
/// A symbolicated stack frame: the function containing the address, where in its source, and
/// the functions inlined at that point.
package struct SymbolicatedFrame: Sendable, Hashable {
    /// The raw (possibly mangled) symbol name.
    package var function: String
    /// Distance of the original address from the start of `function`.
    package var offset: UInt64
    /// `function` demangled (Swift or C++), otherwise equal to `function`.
    package var demangled: String
    /// Where in `function` the address is (the call site of the outermost inlined function),
    /// when DWARF was found.
    package var location: SourceLocation?
    /// Functions inlined at the address, innermost first; each with its own place.
    package var inlined: [InlinedFunction]

    package init(
        function: String, offset: UInt64, demangled: String, location: SourceLocation? = nil,
        inlined: [InlinedFunction] = []
    ) {
        self.function = function
        self.offset = offset
        self.demangled = demangled
        self.location = location
        self.inlined = inlined
    }

    /// The Swift runtime failure the compiler recorded at a trap, as an inlined frame.
    package var swiftRuntimeFailure: SwiftRuntimeFailure? {
        inlined.lazy.compactMap { SwiftRuntimeFailure(functionName: $0.name) }.first
    }
}

/// A place in a source file.
package struct SourceLocation: Sendable, Hashable, CustomStringConvertible {
    package var file: String
    /// 1-based.
    package var line: Int
    /// 1-based; 0 when unknown.
    package var column: Int

    package init(file: String, line: Int, column: Int) {
        self.file = file
        self.line = line
        self.column = column
    }

    /// `file:line:column` (or `file:line`).
    package var description: String { column > 0 ? "\(file):\(line):\(column)" : "\(file):\(line)" }
}

/// A function inlined into a frame's function.
package struct InlinedFunction: Sendable, Hashable {
    /// The linkage (mangled) name, or the plain name when DWARF has no other.
    package var name: String
    package var demangled: String
    /// Where in this function the address is.
    package var location: SourceLocation?

    package init(name: String, demangled: String, location: SourceLocation?) {
        self.name = name
        self.demangled = demangled
        self.location = location
    }
}
