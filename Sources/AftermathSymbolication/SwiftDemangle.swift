import AftermathNextLaunch
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// `char *swift_demangle(const char *mangledName, size_t mangledNameLength,
///                       char *outputBuffer, size_t *outputBufferSize, uint32_t flags)`,
/// exported by libswiftCore. Returns a malloc'ed string, or NULL if the name is not a Swift symbol.
/// `flags` must be 0: the runtime calls `fatalError` for any other value.
@_silgen_name("swift_demangle")
private func _aftermath_swift_demangle(
    _ mangledName: UnsafePointer<CChar>?,
    _ mangledNameLength: Int,
    _ outputBuffer: UnsafeMutablePointer<CChar>?,
    _ outputBufferSize: UnsafeMutablePointer<Int>?,
    _ flags: UInt32
) -> UnsafeMutablePointer<CChar>?

/// Demangles Swift symbol names with the Swift runtime's own demangler (`swift_demangle`).
///
/// Only the full form is available: the runtime entry point accepts no style flags (any non-zero
/// value aborts the process), so there is no "simplified" option.
package enum SwiftDemangle {
    /// Mangling prefixes of Swift symbols: Swift 5+ (`$s`), Swift 4 (`$S`, `_T0`), embedded (`$e`),
    /// with and without the Mach-O leading underscore.
    package static let prefixes = ["$s", "$S", "$e", "_T0", "_$s", "_$S", "_$e"]

    /// Whether `symbol` carries a Swift mangling prefix.
    package static func isSwiftSymbol(_ symbol: String) -> Bool {
        prefixes.contains { symbol.hasPrefix($0) }
    }

    /// The demangled form of `symbol` (e.g. `$sSi` → `Swift.Int`), or `symbol` unchanged if it is
    /// not a Swift symbol or cannot be demangled.
    package static func demangle(_ symbol: String) -> String {
        guard isSwiftSymbol(symbol) else { return symbol }
        let result: String? = symbol.withCString { cName in
            guard let demangled = _aftermath_swift_demangle(cName, strlen(cName), nil, nil, 0) else {
                return nil
            }
            defer { free(demangled) }
            return String(cString: demangled)
        }
        guard let result, !result.isEmpty else { return symbol }
        return result
    }
}
