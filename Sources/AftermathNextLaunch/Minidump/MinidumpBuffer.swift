/// A minidump being written: little-endian fields appended, RVAs (file offsets) patched in later.
struct MinidumpBuffer {
    private(set) var bytes: [UInt8] = []

    /// The offset the next byte goes to, as an RVA.
    var rva: UInt32 { UInt32(truncatingIfNeeded: bytes.count) }
    var count: Int { bytes.count }

    mutating func u8(_ v: UInt8) { bytes.append(v) }
    mutating func u16(_ v: UInt16) { withUnsafeBytes(of: v.littleEndian) { bytes.append(contentsOf: $0) } }
    mutating func u32(_ v: UInt32) { withUnsafeBytes(of: v.littleEndian) { bytes.append(contentsOf: $0) } }
    mutating func u64(_ v: UInt64) { withUnsafeBytes(of: v.littleEndian) { bytes.append(contentsOf: $0) } }
    mutating func zeros(_ n: Int) { bytes.append(contentsOf: repeatElement(0, count: max(0, n))) }
    mutating func append(_ b: [UInt8]) { bytes.append(contentsOf: b) }

    /// Pads with zeros to a multiple of `alignment` (a power of two).
    mutating func align(_ alignment: Int) { zeros((alignment - bytes.count % alignment) % alignment) }

    /// Overwrites a little-endian u32 at offset, which must already be written.
    mutating func set32(_ v: UInt32, at offset: Int) {
        withUnsafeBytes(of: v.littleEndian) { bytes.replaceSubrange(offset..<offset + 4, with: $0) }
    }

    /// Overwrites a little-endian u64 at offset, which must already be written.
    mutating func set64(_ v: UInt64, at offset: Int) {
        withUnsafeBytes(of: v.littleEndian) { bytes.replaceSubrange(offset..<offset + 8, with: $0) }
    }

    /// Appends a MINIDUMP_STRING (u32 byte length without the terminator, UTF-16LE, a 2-byte
    /// NUL), 4-aligned, of at most `maximumUnits` UTF-16 units; returns its RVA.
    mutating func string(_ s: String, maximumUnits: Int = 4096) -> UInt32 {
        align(4)
        let start = rva
        var units = Array(s.utf16.prefix(maximumUnits))
        // A cut between the halves of a surrogate pair would leave a lone high surrogate.
        if let last = units.last, UTF16.isLeadSurrogate(last) { units.removeLast() }
        u32(UInt32(units.count * 2))
        for unit in units { u16(unit) }
        u16(0)
        return start
    }

    /// Appends raw bytes at an 8-aligned offset; returns their RVA.
    mutating func blob(_ b: [UInt8]) -> UInt32 {
        align(8)
        let start = rva
        append(b)
        return start
    }
}

/// A location of bytes in a minidump: size, then RVA (MINIDUMP_LOCATION_DESCRIPTOR).
struct MinidumpLocation: Hashable {
    var size: UInt32
    var rva: UInt32

    static let none = MinidumpLocation(size: 0, rva: 0)
}
