/// OTLP/JSON encoding of a ``LogBatch`` as an `ExportLogsServiceRequest`, and decoding back.
///
/// The output follows the OTLP/JSON rules: lowerCamelCase keys, 64-bit integers as decimal
/// strings, enums as integers, bytes as base64, absent optional fields omitted. Non-finite
/// doubles are written as the proto3 JSON strings `"NaN"`, `"Infinity"` and `"-Infinity"`.
public enum OTLPJSON {
    /// A file or buffer that is not OTLP/JSON of the shape ``encode(_:pretty:)`` writes.
    public struct DecodeError: Error, CustomStringConvertible, Sendable {
        /// What is wrong, and where.
        public var description: String
    }

    /// Encodes `batch` as UTF-8 OTLP/JSON; `pretty` indents it by two spaces.
    public static func encode(_ batch: LogBatch, pretty: Bool = false) -> [UInt8] {
        var out: [UInt8] = []
        node(batch).write(to: &out, pretty: pretty, depth: 0)
        if pretty { out.append(UInt8(ascii: "\n")) }
        return out
    }

    /// Encodes `batch` as an OTLP/JSON string; `pretty` indents it by two spaces.
    public static func encodeString(_ batch: LogBatch, pretty: Bool = false) -> String {
        String(decoding: encode(batch, pretty: pretty), as: UTF8.self)
    }

    /// Decodes an `ExportLogsServiceRequest` with at most one `ResourceLogs` and one `ScopeLogs`,
    /// such as a file written by ``FileExporter``. Unknown keys are ignored.
    public static func decode(_ bytes: [UInt8]) throws -> LogBatch {
        var parser = Parser(bytes: bytes)
        let root = try parser.parseDocument()
        return try batch(root)
    }

    // MARK: Encoding

    private static func node(_ batch: LogBatch) -> Node {
        .object([
            ("resourceLogs", .array([.object([
                ("resource", .object([("attributes", node(batch.resource.attributes))])),
                ("scopeLogs", .array([.object([
                    ("scope", .object([("name", .string(batch.scopeName)), ("version", .string(batch.scopeVersion))])),
                    ("logRecords", .array(batch.records.map(node))),
                ])])),
            ])])),
        ])
    }

    private static func node(_ record: LogRecord) -> Node {
        var fields: [(String, Node)] = [
            ("timeUnixNano", .string(String(record.timeUnixNano))),
            ("observedTimeUnixNano", .string(String(record.observedTimeUnixNano))),
            ("severityNumber", .number(String(record.severityNumber.rawValue))),
        ]
        if let text = record.severityText { fields.append(("severityText", .string(text))) }
        if let name = record.eventName { fields.append(("eventName", .string(name))) }
        if let body = record.body { fields.append(("body", node(body))) }
        fields.append(("attributes", node(record.attributes)))
        return .object(fields)
    }

    private static func node(_ attributes: [Attribute]) -> Node {
        .array(attributes.map { .object([("key", .string($0.key)), ("value", node($0.value))]) })
    }

    private static func node(_ value: AttributeValue) -> Node {
        switch value {
        case .string(let s): .object([("stringValue", .string(s))])
        case .bool(let b): .object([("boolValue", .bool(b))])
        case .int(let i): .object([("intValue", .string(String(i)))])
        case .double(let d):
            if d.isNaN {
                .object([("doubleValue", .string("NaN"))])
            } else if d.isInfinite {
                .object([("doubleValue", .string(d < 0 ? "-Infinity" : "Infinity"))])
            } else {
                // Swift's description is the shortest text that round-trips, and is valid JSON
                // for every finite value ("1.0", "-0.0", "1e-07", "5e+20").
                .object([("doubleValue", .number(d.description))])
            }
        case .bytes(let b): .object([("bytesValue", .string(Base64.encode(b)))])
        case .array(let values): .object([("arrayValue", .object([("values", .array(values.map(node)))]))])
        case .kvlist(let pairs): .object([("kvlistValue", .object([("values", node(pairs))]))])
        }
    }

    // MARK: Decoding

    private static func batch(_ root: Node) throws -> LogBatch {
        var result = LogBatch(resource: Resource(), scopeName: "", scopeVersion: "", records: [])
        guard case .object = root else { throw DecodeError(description: "ExportLogsServiceRequest is not an object") }
        let resourceLogs = try root.array("resourceLogs", in: "ExportLogsServiceRequest")
        guard let resourceLog = resourceLogs.first else { return result }
        guard resourceLogs.count == 1 else { throw DecodeError(description: "more than one resourceLogs entry") }
        guard case .object = resourceLog else { throw DecodeError(description: "resourceLogs[0] is not an object") }
        if let resource = resourceLog["resource"], resource != .null {
            result.resource.attributes = try attributes(resource.array("attributes", in: "resource"))
        }
        let scopeLogs = try resourceLog.array("scopeLogs", in: "resourceLogs")
        guard let scopeLog = scopeLogs.first else { return result }
        guard scopeLogs.count == 1 else { throw DecodeError(description: "more than one scopeLogs entry") }
        guard case .object = scopeLog else { throw DecodeError(description: "scopeLogs[0] is not an object") }
        if let scope = scopeLog["scope"], scope != .null {
            result.scopeName = try scope.string("name", in: "scope") ?? ""
            result.scopeVersion = try scope.string("version", in: "scope") ?? ""
        }
        result.records = try scopeLog.array("logRecords", in: "scopeLogs").enumerated().map { index, node in
            try record(node, at: "logRecords[\(index)]")
        }
        return result
    }

    private static func record(_ node: Node, at path: String) throws -> LogRecord {
        guard case .object = node else { throw DecodeError(description: "\(path) is not an object") }
        var record = LogRecord(
            timeUnixNano: try integer(node["timeUnixNano"], as: UInt64.self, at: "\(path).timeUnixNano") ?? 0,
            observedTimeUnixNano: try integer(node["observedTimeUnixNano"], as: UInt64.self, at: "\(path).observedTimeUnixNano") ?? 0,
            severityNumber: SeverityNumber(rawValue: try severity(node["severityNumber"], at: "\(path).severityNumber")),
            eventName: try node.string("eventName", in: path),
            attributes: try attributes(node.array("attributes", in: path), at: "\(path).attributes")
        )
        record.severityText = try node.string("severityText", in: path)
        if let body = node["body"], body != .null {
            record.body = try value(body, at: "\(path).body")
        }
        return record
    }

    private static func severity(_ node: Node?, at path: String) throws -> Int32 {
        switch node {
        case nil, .null?: return 0
        case .number(let text)?:
            if let value = Int32(text) { return value }
        default: break
        }
        throw DecodeError(description: "\(path) is not an integer")
    }

    private static func integer<T: FixedWidthInteger>(_ node: Node?, as type: T.Type, at path: String) throws -> T? {
        switch node {
        case nil, .null?: return nil
        case .string(let text)?, .number(let text)?:
            if let value = T(text) { return value }
        default: break
        }
        throw DecodeError(description: "\(path) is not a \(T.self) as a decimal string")
    }

    private static func attributes(_ nodes: [Node], at path: String = "attributes") throws -> [Attribute] {
        try nodes.enumerated().map { index, node in
            let here = "\(path)[\(index)]"
            guard let key = try node.string("key", in: here) else { throw DecodeError(description: "\(here) has no key") }
            guard let value = node["value"] else { throw DecodeError(description: "\(here) has no value") }
            return Attribute(key, try self.value(value, at: "\(here).value"))
        }
    }

    private static func value(_ node: Node, at path: String) throws -> AttributeValue {
        guard case .object(let fields) = node, let (key, field) = fields.first(where: { $0.1 != .null }) else {
            throw DecodeError(description: "\(path) is not an AnyValue object with one value")
        }
        switch (key, field) {
        case ("stringValue", .string(let s)): return .string(s)
        case ("boolValue", .bool(let b)): return .bool(b)
        case ("intValue", _):
            if let i = try integer(field, as: Int64.self, at: "\(path).intValue") { return .int(i) }
        case ("doubleValue", .number(let text)), ("doubleValue", .string(let text)):
            switch text {
            case "NaN": return .double(.nan)
            case "Infinity": return .double(.infinity)
            case "-Infinity": return .double(-.infinity)
            default: if let d = Double(text), d.isFinite { return .double(d) }
            }
        case ("bytesValue", .string(let s)):
            if let bytes = Base64.decode(s) { return .bytes(bytes) }
        case ("arrayValue", .object):
            return .array(try field.array("values", in: "\(path).arrayValue").enumerated().map { index, element in
                try value(element, at: "\(path).arrayValue.values[\(index)]")
            })
        case ("kvlistValue", .object):
            return .kvlist(try attributes(field.array("values", in: "\(path).kvlistValue"), at: "\(path).kvlistValue.values"))
        default: break
        }
        throw DecodeError(description: "\(path).\(key) is not a valid value")
    }
}

// MARK: - JSON tree

extension OTLPJSON {
    /// A parsed or to-be-written JSON value; numbers keep their text so no precision is lost.
    fileprivate enum Node: Equatable {
        case null
        case bool(Bool)
        case number(String)
        case string(String)
        case array([Node])
        case object([(String, Node)])

        static func == (lhs: Node, rhs: Node) -> Bool {
            switch (lhs, rhs) {
            case (.null, .null): true
            case (.bool(let a), .bool(let b)): a == b
            case (.number(let a), .number(let b)), (.string(let a), .string(let b)): a == b
            case (.array(let a), .array(let b)): a == b
            case (.object(let a), .object(let b)): a.elementsEqual(b) { $0.0 == $1.0 && $0.1 == $1.1 }
            default: false
            }
        }

        /// The first member named `key`, if this is an object.
        subscript(key: String) -> Node? {
            guard case .object(let fields) = self else { return nil }
            return fields.first { $0.0 == key }?.1
        }

        /// The array member `key`; `[]` when missing or null.
        func array(_ key: String, in path: String) throws -> [Node] {
            switch self[key] {
            case nil, .null?: return []
            case .array(let elements)?: return elements
            default: throw DecodeError(description: "\(path).\(key) is not an array")
            }
        }

        /// The string member `key`; `nil` when missing or null.
        func string(_ key: String, in path: String) throws -> String? {
            switch self[key] {
            case nil, .null?: return nil
            case .string(let s)?: return s
            default: throw DecodeError(description: "\(path).\(key) is not a string")
            }
        }

        func write(to out: inout [UInt8], pretty: Bool, depth: Int) {
            func newline(_ depth: Int) {
                guard pretty else { return }
                out.append(UInt8(ascii: "\n"))
                out.append(contentsOf: repeatElement(UInt8(ascii: " "), count: 2 * depth))
            }
            switch self {
            case .null: out.append(contentsOf: "null".utf8)
            case .bool(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
            case .number(let text): out.append(contentsOf: text.utf8)
            case .string(let s): Self.writeString(s, to: &out)
            case .array(let elements):
                out.append(UInt8(ascii: "["))
                for (index, element) in elements.enumerated() {
                    if index > 0 { out.append(UInt8(ascii: ",")) }
                    newline(depth + 1)
                    element.write(to: &out, pretty: pretty, depth: depth + 1)
                }
                if !elements.isEmpty { newline(depth) }
                out.append(UInt8(ascii: "]"))
            case .object(let fields):
                out.append(UInt8(ascii: "{"))
                for (index, (key, value)) in fields.enumerated() {
                    if index > 0 { out.append(UInt8(ascii: ",")) }
                    newline(depth + 1)
                    Self.writeString(key, to: &out)
                    out.append(UInt8(ascii: ":"))
                    if pretty { out.append(UInt8(ascii: " ")) }
                    value.write(to: &out, pretty: pretty, depth: depth + 1)
                }
                if !fields.isEmpty { newline(depth) }
                out.append(UInt8(ascii: "}"))
            }
        }

        /// Writes `s` as a JSON string: `"` and `\` escaped, control characters as `\n`, `\t`, ...
        /// or `\u00XX`; everything else as its UTF-8 bytes (a Swift `String` is always valid UTF-8).
        private static func writeString(_ s: String, to out: inout [UInt8]) {
            let hex = Array("0123456789abcdef".utf8)
            out.append(UInt8(ascii: "\""))
            for byte in s.utf8 {
                switch byte {
                case UInt8(ascii: "\""): out.append(contentsOf: #"\""#.utf8)
                case UInt8(ascii: "\\"): out.append(contentsOf: #"\\"#.utf8)
                case 0x0A: out.append(contentsOf: #"\n"#.utf8)
                case 0x0D: out.append(contentsOf: #"\r"#.utf8)
                case 0x09: out.append(contentsOf: #"\t"#.utf8)
                case 0x08: out.append(contentsOf: #"\b"#.utf8)
                case 0x0C: out.append(contentsOf: #"\f"#.utf8)
                case 0x00..<0x20:
                    out.append(contentsOf: #"\u00"#.utf8)
                    out.append(hex[Int(byte >> 4)])
                    out.append(hex[Int(byte & 0xF)])
                default: out.append(byte)
                }
            }
            out.append(UInt8(ascii: "\""))
        }
    }

    /// A strict RFC 8259 parser producing ``Node``s.
    fileprivate struct Parser {
        let bytes: [UInt8]
        var index = 0
        private static let maxDepth = 256

        init(bytes: [UInt8]) { self.bytes = bytes }

        mutating func parseDocument() throws -> Node {
            if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { index = 3 }  // tolerate a UTF-8 BOM
            let value = try parseValue(depth: 0)
            skipWhitespace()
            guard index == bytes.count else { throw error("unexpected data after the JSON value") }
            return value
        }

        private func error(_ message: String) -> DecodeError {
            DecodeError(description: "invalid JSON at byte \(index): \(message)")
        }

        private mutating func skipWhitespace() {
            while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 }
        }

        private mutating func expect(_ literal: String) throws {
            let utf8 = Array(literal.utf8)
            guard bytes[index...].starts(with: utf8) else { throw error("expected \(literal)") }
            index += utf8.count
        }

        private mutating func parseValue(depth: Int) throws -> Node {
            guard depth < Self.maxDepth else { throw error("nested too deeply") }
            skipWhitespace()
            guard index < bytes.count else { throw error("unexpected end of input") }
            switch bytes[index] {
            case UInt8(ascii: "{"):
                index += 1
                var fields: [(String, Node)] = []
                skipWhitespace()
                if index < bytes.count, bytes[index] == UInt8(ascii: "}") { index += 1; return .object(fields) }
                while true {
                    skipWhitespace()
                    guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw error("expected a key") }
                    let key = try parseString()
                    skipWhitespace()
                    try expect(":")
                    fields.append((key, try parseValue(depth: depth + 1)))
                    skipWhitespace()
                    if index < bytes.count, bytes[index] == UInt8(ascii: ",") { index += 1; continue }
                    try expect("}")
                    return .object(fields)
                }
            case UInt8(ascii: "["):
                index += 1
                var elements: [Node] = []
                skipWhitespace()
                if index < bytes.count, bytes[index] == UInt8(ascii: "]") { index += 1; return .array(elements) }
                while true {
                    elements.append(try parseValue(depth: depth + 1))
                    skipWhitespace()
                    if index < bytes.count, bytes[index] == UInt8(ascii: ",") { index += 1; continue }
                    try expect("]")
                    return .array(elements)
                }
            case UInt8(ascii: "\""): return .string(try parseString())
            case UInt8(ascii: "t"): try expect("true"); return .bool(true)
            case UInt8(ascii: "f"): try expect("false"); return .bool(false)
            case UInt8(ascii: "n"): try expect("null"); return .null
            default: return .number(try parseNumber())
            }
        }

        private mutating func parseNumber() throws -> String {
            let start = index
            func digits() -> Int {
                let from = index
                while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
                return index - from
            }
            if index < bytes.count, bytes[index] == UInt8(ascii: "-") { index += 1 }
            let intStart = index
            let intDigits = digits()
            guard intDigits > 0, intDigits == 1 || bytes[intStart] != UInt8(ascii: "0") else { throw error("invalid number") }
            if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
                index += 1
                guard digits() > 0 else { throw error("invalid number") }
            }
            if index < bytes.count, bytes[index] | 0x20 == UInt8(ascii: "e") {
                index += 1
                if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
                guard digits() > 0 else { throw error("invalid number") }
            }
            return String(decoding: bytes[start..<index], as: UTF8.self)
        }

        private mutating func parseString() throws -> String {
            index += 1  // opening quote
            var utf8: [UInt8] = []
            while true {
                guard index < bytes.count else { throw error("unterminated string") }
                let byte = bytes[index]
                index += 1
                switch byte {
                case UInt8(ascii: "\""):
                    guard let s = String(validating: utf8, as: UTF8.self) else { throw error("string is not valid UTF-8") }
                    return s
                case 0x00..<0x20: throw error("unescaped control character in string")
                case UInt8(ascii: "\\"):
                    guard index < bytes.count else { throw error("unterminated string") }
                    let escape = bytes[index]
                    index += 1
                    switch escape {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): utf8.append(escape)
                    case UInt8(ascii: "b"): utf8.append(0x08)
                    case UInt8(ascii: "f"): utf8.append(0x0C)
                    case UInt8(ascii: "n"): utf8.append(0x0A)
                    case UInt8(ascii: "r"): utf8.append(0x0D)
                    case UInt8(ascii: "t"): utf8.append(0x09)
                    case UInt8(ascii: "u"):
                        var scalar = try parseHex4()
                        if (0xD800..<0xDC00).contains(scalar) {
                            guard bytes[index...].starts(with: Array(#"\u"#.utf8)) else { throw error("lone surrogate") }
                            index += 2
                            let low = try parseHex4()
                            guard (0xDC00..<0xE000).contains(low) else { throw error("lone surrogate") }
                            scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                        }
                        guard let unicode = Unicode.Scalar(scalar) else { throw error("lone surrogate") }
                        utf8.append(contentsOf: String(Character(unicode)).utf8)
                    default: throw error("invalid escape")
                    }
                default: utf8.append(byte)
                }
            }
        }

        private mutating func parseHex4() throws -> UInt32 {
            guard index + 4 <= bytes.count,
                  let value = UInt32(String(decoding: bytes[index..<index + 4], as: UTF8.self), radix: 16)
            else { throw error("invalid \\u escape") }
            index += 4
            return value
        }
    }

    /// RFC 4648 base64, as proto3 JSON writes `bytes`; decoding also accepts the URL-safe
    /// alphabet and missing padding, as proto3 JSON parsers do.
    fileprivate enum Base64 {
        private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

        static func encode(_ bytes: [UInt8]) -> String {
            var out: [UInt8] = []
            out.reserveCapacity((bytes.count + 2) / 3 * 4)
            var i = 0
            while i < bytes.count {
                let n = min(3, bytes.count - i)
                var chunk = UInt32(bytes[i]) << 16
                if n > 1 { chunk |= UInt32(bytes[i + 1]) << 8 }
                if n > 2 { chunk |= UInt32(bytes[i + 2]) }
                for j in 0..<4 {
                    out.append(j <= n ? alphabet[Int((chunk >> (18 - 6 * UInt32(j))) & 0x3F)] : UInt8(ascii: "="))
                }
                i += 3
            }
            return String(decoding: out, as: UTF8.self)
        }

        static func decode(_ text: String) -> [UInt8]? {
            var out: [UInt8] = []
            var buffer: UInt32 = 0
            var bits = 0
            var padding = 0
            for byte in text.utf8 {
                let sextet: UInt8
                switch byte {
                case UInt8(ascii: "A")...UInt8(ascii: "Z"): sextet = byte - UInt8(ascii: "A")
                case UInt8(ascii: "a")...UInt8(ascii: "z"): sextet = byte - UInt8(ascii: "a") + 26
                case UInt8(ascii: "0")...UInt8(ascii: "9"): sextet = byte - UInt8(ascii: "0") + 52
                case UInt8(ascii: "+"), UInt8(ascii: "-"): sextet = 62
                case UInt8(ascii: "/"), UInt8(ascii: "_"): sextet = 63
                case UInt8(ascii: "="): padding += 1; continue
                default: return nil
                }
                guard padding == 0 else { return nil }
                buffer = buffer << 6 | UInt32(sextet)
                bits += 6
                if bits >= 8 {
                    bits -= 8
                    out.append(UInt8(truncatingIfNeeded: buffer >> UInt32(bits)))
                }
            }
            // 6 or more leftover bits, or more than two '=', cannot come from an encoder.
            guard bits < 6, padding <= 2 else { return nil }
            return out
        }
    }
}
