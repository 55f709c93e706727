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
        raw.copyBytes(from: clippedUTF8(s, capacity: raw.count))
    }

    /// s as a field of capacity bytes (NUL included) keeps it: what a later read gives back.
    /// Values compared across runs (service.version) are clipped once, so both sides agree.
    package static func clipped(_ s: String, capacity: Int) -> String {
        String(decoding: clippedUTF8(s, capacity: capacity), as: UTF8.self)
    }

    @usableFromInline
    package static func clippedUTF8(_ s: String, capacity: Int) -> ArraySlice<UInt8> {
        let full = Array(s.utf8)
        var end = min(full.count, max(0, capacity - 1))
        // Do not cut a multi-byte character in half.
        while end > 0, end < full.count, full[end] & 0xC0 == 0x80 { end -= 1 }
        return full[..<end]
    }
}
