/// Universally Unique Lexicographically Sortable Identifiers (https://github.com/ulid/spec),
/// built deterministically from a time and entropy bytes, as `log.record.uid` needs.
package enum ULID {
    private static let alphabet = Array("0123456789ABCDEFGHJKMNPQRSTVWXYZ".utf8)

    /// A 26-character Crockford base32 ULID: the low 48 bits of `timeMilliseconds`, then 80 bits
    /// from the first 10 bytes of `entropy` (zero-padded when shorter). Same inputs, same output.
    package static func make(timeMilliseconds: UInt64, entropy: [UInt8]) -> String {
        var out = [UInt8](repeating: 0, count: 26)
        var time = timeMilliseconds & 0xFFFF_FFFF_FFFF
        for i in stride(from: 9, through: 0, by: -1) {
            out[i] = alphabet[Int(time & 31)]
            time >>= 5
        }
        // 80 bits as a big-endian (high 16, low 64) pair, written 5 bits at a time from the end.
        let bytes = Array(entropy.prefix(10)) + [UInt8](repeating: 0, count: max(0, 10 - entropy.count))
        var high = UInt64(bytes[0]) << 8 | UInt64(bytes[1])
        var low = bytes[2...].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        for i in stride(from: 25, through: 10, by: -1) {
            out[i] = alphabet[Int(low & 31)]
            low = low >> 5 | (high & 31) << 59
            high >>= 5
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Whether `s` is a ULID: 26 Crockford base32 characters (either case) whose time fits in 48 bits.
    package static func isValid(_ s: String) -> Bool {
        let utf8 = Array(s.utf8)
        return utf8.count == 26 && utf8[0] <= UInt8(ascii: "7") && utf8.allSatisfy { value(of: $0) != nil }
    }

    /// The time part of a valid ULID, in milliseconds since the Unix epoch; `nil` if `s` is not one.
    package static func timeMilliseconds(of s: String) -> UInt64? {
        guard isValid(s) else { return nil }
        return s.utf8.prefix(10).reduce(UInt64(0)) { $0 << 5 | UInt64(value(of: $1)!) }
    }

    private static func value(of character: UInt8) -> UInt8? {
        let upper = (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(character) ? character - 32 : character
        return alphabet.firstIndex(of: upper).map(UInt8.init)
    }
}
