/// Lowercase hex of byte buffers.
enum Hex {
    static func encode<T>(_ field: inout T, count: Int) -> String {
        withUnsafeBytes(of: &field) { raw in encode(Array(raw.prefix(max(0, count)))) }
    }

    static func encode(_ bytes: some Sequence<UInt8>) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        for b in bytes {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 15)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    static func address(_ value: UInt64, width: Int = 16) -> String {
        let s = String(value, radix: 16)
        return "0x" + String(repeating: "0", count: max(0, width - s.count)) + s
    }
}
