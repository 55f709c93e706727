/// Lowercase hex of byte buffers.
package enum Hex {
    package static func encode<T>(_ field: inout T, count: Int) -> String {
        withUnsafeBytes(of: &field) { raw in encode(Array(raw.prefix(max(0, count)))) }
    }

    package static func encode(_ bytes: some Sequence<UInt8>) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        for b in bytes {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 15)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    package static func address(_ value: UInt64, width: Int = 16) -> String {
        let s = String(value, radix: 16)
        return "0x" + String(repeating: "0", count: max(0, width - s.count)) + s
    }

    /// Bytes of a hex string; nil when it is not hex.
    package static func decode(_ s: String) -> [UInt8]? {
        let chars = Array(s.utf8)
        guard chars.count % 2 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(chars.count / 2)
        func value(_ c: UInt8) -> UInt8? {
            switch c {
            case 48...57: return c - 48
            case 97...102: return c - 87
            case 65...70: return c - 55
            default: return nil
            }
        }
        var i = 0
        while i < chars.count {
            guard let hi = value(chars[i]), let lo = value(chars[i + 1]) else { return nil }
            out.append(hi << 4 | lo)
            i += 2
        }
        return out
    }
}
