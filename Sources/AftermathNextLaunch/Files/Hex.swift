/// Lowercase hex of byte buffers.
package enum Hex {
    static let digits: StaticString = "0123456789abcdef"

    /// The first count bytes of a C array, written straight into the string: no array between.
    /// (Generic: called from another module, it has the runtime build T's metadata, by name
    /// for a C array's tuple. Code on start's path passes the bytes to ``encode(raw:)``.)
    package static func encode<T>(_ field: inout T, count: Int) -> String {
        withUnsafeBytes(of: &field) { raw in encode(raw: UnsafeRawBufferPointer(rebasing: raw.prefix(max(0, count)))) }
    }

    /// The bytes' hex, written straight into the string.
    package static func encode(raw bytes: UnsafeRawBufferPointer) -> String {
        String(unsafeUninitializedCapacity: bytes.count * 2) { out in
            digits.withUTF8Buffer { d in
                for (i, b) in bytes.enumerated() {
                    out[2 * i] = d[Int(b >> 4)]
                    out[2 * i + 1] = d[Int(b & 15)]
                }
            }
            return bytes.count * 2
        }
    }

    package static func encode(_ bytes: some Sequence<UInt8>) -> String {
        var out = [UInt8]()
        digits.withUTF8Buffer { d in
            for b in bytes {
                out.append(d[Int(b >> 4)])
                out.append(d[Int(b & 15)])
            }
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
