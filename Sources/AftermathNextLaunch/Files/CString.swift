/// Reading and writing the fixed-size, NUL-terminated char arrays of the C file formats.
package enum CString {
    /// The string in a fixed char array (a C tuple), up to its first NUL; invalid UTF-8 is
    /// replaced, never trusted.
    package static func read<T>(_ field: inout T) -> String {
        withUnsafeBytes(of: &field) { raw in
            let bytes = raw.prefix { $0 != 0 }
            return String(decoding: bytes, as: UTF8.self)
        }
    }

    /// Copies s into a fixed char array, truncated at a UTF-8 boundary, always NUL-terminated.
    /// Called from another module it is not specialised, and builds the tuple's type at run
    /// time (a 256-element tuple's metadata): code on start's path passes the array's bytes to
    /// ``write(_:intoBytes:)`` itself, from `withUnsafeMutableBytes(of:)`.
    @inlinable
    package static func write<T>(_ s: String, into field: inout T) {
        withUnsafeMutableBytes(of: &field) { write(s, intoBytes: $0) }
    }

    /// Copies s into raw, truncated at a UTF-8 boundary, always NUL-terminated.
    @usableFromInline
    package static func write(_ s: String, intoBytes raw: UnsafeMutableRawBufferPointer) {
        raw.initializeMemory(as: UInt8.self, repeating: 0)
        guard raw.count > 0 else { return }
        withClippedUTF8(s, capacity: raw.count) { raw.copyBytes(from: $0) }
    }

    /// s as a field of capacity bytes (NUL included) keeps it: what a later read gives back.
    /// Values compared across runs (service.version) are clipped once, so both sides agree.
    package static func clipped(_ s: String, capacity: Int) -> String {
        withClippedUTF8(s, capacity: capacity) { String(decoding: $0, as: UTF8.self) }
    }

    /// Calls body with the UTF-8 bytes of s that a field of capacity bytes (NUL included)
    /// keeps, cut at a character boundary. The string's own bytes, not a copy: start clips
    /// every string of its context, and an array of them had the runtime build its type by
    /// name.
    static func withClippedUTF8<R>(_ s: String, capacity: Int, _ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        var s = s
        return s.withUTF8 { full in
            var end = min(full.count, max(0, capacity - 1))
            // Do not cut a multi-byte character in half.
            while end > 0, end < full.count, full[end] & 0xC0 == 0x80 { end -= 1 }
            return body(UnsafeBufferPointer(rebasing: full[..<end]))
        }
    }
}
