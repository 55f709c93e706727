import Foundation

extension UUID {
    /// A UUID from 16 bytes of a C array.
    /// Copied byte for byte, zero-filled past a shorter array: no [UInt8] between, which had the
    /// runtime build its type by name at start.
    package init<T>(bytes field: inout T) {
        var u: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &u) { out in
            withUnsafeBytes(of: &field) { out.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0.prefix(16))) }
        }
        self.init(uuid: u)
    }

    /// The 16 bytes of this UUID.
    package var bytes: [UInt8] {
        withUnsafeBytes(of: uuid) { Array($0) }
    }

    /// Copies the 16 bytes into raw (its first 16; raw must hold them): no array between, as
    /// start fills its C context, where a [UInt8] had the runtime build its type by name.
    package func copyBytes(into raw: UnsafeMutableRawBufferPointer) {
        withUnsafeBytes(of: uuid) { raw.copyBytes(from: $0) }
    }

    /// The lowercase form used in records (session.id, app.crash.id).
    package var lowercased: String { uuidString.lowercased() }

    /// The stem of the report files named by this id: its 32 hex digits, lowercase, as the
    /// handler and the watchdog write them.
    package var fileStem: String { lowercased.replacingOccurrences(of: "-", with: "") }
}
