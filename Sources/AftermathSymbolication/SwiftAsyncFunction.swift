/// Swift async functions by their symbols, and the async callers a tool shows after the machine
/// frames.
///
/// An async function is split into funclets: the entry (its own mangled name) and one
/// continuation per suspension point, named with the suffix `TQ<n>_` (await resume) or `TY<n>_`
/// (suspend resume). A chain that starts at the task's resume context (anchor `task`) may list
/// calls that returned since the task last resumed ahead of the innermost async function, which
/// runs on the machine stack: those are dropped, as LLDB starts its async frames at the innermost
/// async frame's own context.
package enum SwiftAsyncFunction {
    /// The mangled name of the function a funclet belongs to: the name without its `TQ<n>_` or
    /// `TY<n>_` suffix (an entry funclet's name is the function's).
    package static func function(ofFunclet mangled: String) -> String {
        let bytes = Array(mangled.utf8)
        guard bytes.count > 4, bytes.last == UInt8(ascii: "_") else { return mangled }
        var i = bytes.count - 2
        while i > 0, bytes[i] >= UInt8(ascii: "0"), bytes[i] <= UInt8(ascii: "9") { i -= 1 }
        guard i >= 1, i < bytes.count - 2, bytes[i - 1] == UInt8(ascii: "T"),
            bytes[i] == UInt8(ascii: "Q") || bytes[i] == UInt8(ascii: "Y")
        else { return mangled }
        return String(decoding: bytes[..<(i - 1)], as: UTF8.self)
    }

    /// Whether a mangled Swift name is an async function or one of its funclets.
    package static func isAsync(mangled: String, demangled: String) -> Bool {
        guard mangled.hasPrefix("$s") || mangled.hasPrefix("_$s") else { return false }
        return function(ofFunclet: mangled) != mangled || demangled.contains(" async")
            || demangled.contains("resume partial function for")
    }

    /// How many of the chain's first links to drop: with anchor `task`, up to and including the
    /// first link that resumes into the innermost async machine frame's function (looked for in
    /// the first eight); 0 otherwise. Names are mangled, nil where unknown; machine innermost
    /// first.
    package static func staleLinks(
        machine: [(mangled: String, demangled: String)?], chain: [String?], anchor: String?
    ) -> Int {
        guard anchor == "task",
            let innermost = machine.lazy.compactMap({ $0 }).first(where: {
                isAsync(mangled: $0.mangled, demangled: $0.demangled)
            })
        else { return 0 }
        let running = function(ofFunclet: innermost.mangled)
        for (i, name) in chain.prefix(8).enumerated() {
            if let name, function(ofFunclet: name) == running { return i + 1 }
        }
        return 0
    }
}
