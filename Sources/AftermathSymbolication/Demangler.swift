import CSymbolication
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Demangles symbol names: Swift's with the Swift runtime's demangler, C++'s (Itanium ABI,
/// `_Z...`) with libstdc++'s `__cxa_demangle`.
package enum Demangler {
    /// The demangled name, or `name` unchanged when it is neither, or cannot be demangled.
    package static func demangle(_ name: String) -> String {
        if SwiftDemangle.isSwiftSymbol(name) { return SwiftDemangle.demangle(name) }
        guard name.hasPrefix("_Z"), let demangled = aftsym_cxx_demangle(name) else { return name }
        defer { free(demangled) }
        return String(cString: demangled)
    }
}

extension String {
    /// The NUL-terminated text in a C buffer.
    init(cBuffer buffer: [CChar]) {
        self.init(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
