#if canImport(Glibc)
import Glibc
#endif

/// The OpenTelemetry SDK environment variables Aftermath reads, parsed as the specification
/// says. Values the app sets in code win over these.
package struct OTelEnvironment: Sendable {
    package var variables: [String: String]

    package init(_ variables: [String: String]) { self.variables = variables }

    /// This process's `OTEL_*` variables, read from `environ`: a tenth of what
    /// `ProcessInfo.processInfo.environment` costs (a dictionary of every variable, and the
    /// Foundation machinery its first use sets up), a tenth of start's background work before.
    package static func current() -> OTelEnvironment {
        var variables: [String: String] = [:]
        var entry = environ
        while let pointer = entry.pointee {
            if strncmp(pointer, "OTEL_", 5) == 0 {
                let text = String(cString: pointer)
                if let equals = text.firstIndex(of: "=") {
                    variables[String(text[..<equals])] = String(text[text.index(after: equals)...])
                }
            }
            entry += 1
        }
        return OTelEnvironment(variables)
    }

    /// The value of name, nil when unset or empty (the specification treats both alike).
    package subscript(_ name: String) -> String? {
        guard let value = variables[name]?.trimmingBlanks(), !value.isEmpty else { return nil }
        return value
    }

    /// OTEL_SDK_DISABLED: only `true` (any case) disables.
    package var sdkDisabled: Bool { Self.disables(variables["OTEL_SDK_DISABLED"]) }

    /// Whether a value of OTEL_SDK_DISABLED disables the SDK: only `true` (any case, blanks
    /// around it ignored).
    package static func disables(_ value: String?) -> Bool { value?.trimmingBlanks().lowercased() == "true" }

    /// OTEL_RESOURCE_ATTRIBUTES, then OTEL_SERVICE_NAME as service.name (it wins over the list).
    package var resourceAttributes: [Attribute] {
        var out: [Attribute] = []
        for (key, value) in Self.keyValueList(self["OTEL_RESOURCE_ATTRIBUTES"] ?? "")
        where key != "service.name" || self["OTEL_SERVICE_NAME"] == nil {
            out.removeAll { $0.key == key }
            out.append(Attribute(key, .string(value)))
        }
        if let name = self["OTEL_SERVICE_NAME"] { out.append(Attribute("service.name", .string(name))) }
        return out
    }

    /// A `key1=value1,key2=value2` list (the W3C Baggage format the specification uses for
    /// headers and resource attributes): blanks around keys and values trimmed, values
    /// percent-decoded; an entry without `=` or with an empty key is skipped.
    package static func keyValueList(_ text: String) -> [(String, String)] {
        text.split(separator: ",").compactMap { entry in
            guard let equals = entry.firstIndex(of: "=") else { return nil }
            let key = String(entry[..<equals]).trimmingBlanks()
            let value = percentDecoded(String(entry[equals...].dropFirst()).trimmingBlanks())
            return key.isEmpty ? nil : (key, value)
        }
    }

    /// %XX sequences decoded as UTF-8 bytes; a malformed sequence is kept as written.
    package static func percentDecoded(_ text: String) -> String {
        let bytes = Array(text.utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var i = 0
        while i < bytes.count {
            if bytes[i] == UInt8(ascii: "%"), i + 2 < bytes.count, let high = hexValue(bytes[i + 1]),
                let low = hexValue(bytes[i + 2])
            {
                out.append(high << 4 | low)
                i += 3
            } else {
                out.append(bytes[i])
                i += 1
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

extension String {
    /// Without leading and trailing spaces and tabs.
    func trimmingBlanks() -> String {
        let blank: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        guard let first = firstIndex(where: { !blank($0) }), let last = lastIndex(where: { !blank($0) }) else {
            return ""
        }
        return String(self[first...last])
    }
}
