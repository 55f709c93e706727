/// Reading and writing the fixed-size, NUL-terminated char arrays of the C file formats.
enum CString {
    /// The string in a fixed char array (a C tuple), up to its first NUL; invalid UTF-8 is
    /// replaced, never trusted.
    static func read<T>(_ field: inout T) -> String {
        withUnsafeBytes(of: &field) { raw in
            let bytes = raw.prefix { $0 != 0 }
            return String(decoding: bytes, as: UTF8.self)
        }
    }

    /// Copies s into a fixed char array, truncated at a UTF-8 boundary, always NUL-terminated.
    static func write<T>(_ s: String, into field: inout T) {
        withUnsafeMutableBytes(of: &field) { raw in
            raw.initializeMemory(as: UInt8.self, repeating: 0)
            guard raw.count > 0 else { return }
            let full = Array(s.utf8)
            var end = min(full.count, raw.count - 1)
            // Do not cut a multi-byte character in half.
            while end > 0, end < full.count, full[end] & 0xC0 == 0x80 { end -= 1 }
            let utf8 = full[..<end]
            raw.copyBytes(from: utf8)
        }
    }
}

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

/// Names of the AFT_ARCH_* values.
enum Architecture {
    static func name(_ value: UInt32) -> String {
        switch value {
        case UInt32(AFT_ARCH_X86_64): return "x86_64"
        case UInt32(AFT_ARCH_ARM64): return "arm64"
        default: return "unknown"
        }
    }

    /// The architecture this code was built for, as an AFT_ARCH_* value.
    static var current: UInt32 {
        #if arch(x86_64)
        return UInt32(AFT_ARCH_X86_64)
        #elseif arch(arm64)
        return UInt32(AFT_ARCH_ARM64)
        #else
        return UInt32(AFT_ARCH_UNKNOWN)
        #endif
    }
}

import CSignalShim
import Foundation

extension UUID {
    /// A UUID from 16 bytes of a C array.
    init<T>(bytes field: inout T) {
        let b = withUnsafeBytes(of: &field) { Array($0.prefix(16)) + Array(repeating: 0, count: max(0, 16 - $0.count)) }
        self.init(uuid: (b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]))
    }

    /// The 16 bytes of this UUID.
    var bytes: [UInt8] {
        withUnsafeBytes(of: uuid) { Array($0) }
    }

    /// The lowercase form used in records (session.id, app.crash.id).
    var lowercased: String { uuidString.lowercased() }
}
