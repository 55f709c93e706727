/// Why a Swift program trapped, as the compiler records it: an artificial inlined function
/// named "Swift runtime failure: <message>" at the trap instruction (optimized code with -g,
/// and unoptimized overflow checks).
package struct SwiftRuntimeFailure: Sendable, Hashable {
    /// The compiler's message, e.g. "Unexpectedly found nil while unwrapping an Optional value".
    package var message: String
    /// The reason in the words people use, e.g. "force-unwrap of nil"; the message itself when
    /// it is not a known one.
    package var reason: String

    package static let prefix = "Swift runtime failure: "

    /// The failure named by an inlined function's name, or nil if it is not one.
    package init?(functionName: String) {
        guard functionName.hasPrefix(Self.prefix) else { return nil }
        message = String(functionName.dropFirst(Self.prefix.count))
        reason = Self.reason(for: message)
    }

    /// Known messages (the standard library's and the compiler's) by their start.
    static let reasons: [(prefix: String, reason: String)] = [
        ("Unexpectedly found nil while unwrapping", "force-unwrap of nil"),
        ("Unexpectedly found nil while implicitly unwrapping", "force-unwrap of nil"),
        ("unsafelyUnwrapped of nil", "force-unwrap of nil"),
        ("Index out of range", "index out of range"),
        ("Array index is out of range", "index out of range"),
        ("String index is out of bounds", "index out of range"),
        ("arithmetic overflow", "arithmetic overflow"),
        ("Division by zero", "division by zero"),
        ("Division results in an overflow", "arithmetic overflow"),
        ("Not enough bits to represent", "integer conversion overflow"),
        ("Negative value is not representable", "integer conversion overflow"),
        ("precondition failure", "precondition failure"),
        ("assertion failed", "assertion failure"),
        ("Fatal error", "fatal error"),
        ("Range requires lowerBound <= upperBound", "invalid range"),
        ("Can't form Range with upperBound < lowerBound", "invalid range"),
        ("Unowned reference", "unowned reference to a deallocated object"),
        ("Could not cast value", "failed forced cast (as!)"),
        ("Simultaneous accesses", "exclusivity violation"),
    ]

    static func reason(for message: String) -> String {
        let lowered = message.lowercased()
        return reasons.first { lowered.hasPrefix($0.prefix.lowercased()) }?.reason ?? message
    }
}
