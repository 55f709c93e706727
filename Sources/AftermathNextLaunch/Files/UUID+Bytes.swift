import Foundation

extension UUID {
    /// A UUID from 16 bytes of a C array.
    package init<T>(bytes field: inout T) {
        let b = withUnsafeBytes(of: &field) { Array($0.prefix(16)) + Array(repeating: 0, count: max(0, 16 - $0.count)) }
        self.init(
            uuid: (b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15])
        )
    }

    /// The 16 bytes of this UUID.
    package var bytes: [UInt8] {
        withUnsafeBytes(of: uuid) { Array($0) }
    }

    /// The lowercase form used in records (session.id, app.crash.id).
    package var lowercased: String { uuidString.lowercased() }

    /// The stem of the report files named by this id: its 32 hex digits, lowercase, as the
    /// handler and the watchdog write them.
    package var fileStem: String { lowercased.replacingOccurrences(of: "-", with: "") }
}
