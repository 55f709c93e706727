import AftermathOTLP
import Foundation

/// A crash's attachment as it waits in attachments/ (`<id>.attachment`) until its exporter
/// acknowledges it.
///
/// Layout, little-endian: the magic `AFTATTCH`, format version (u32, 1), metadata size (u32),
/// payload size (u64), CRC-32 of metadata and payload (u32), 4 reserved bytes: 32 bytes; then
/// the metadata (JSON: id, file name, content type, string attributes), then the payload. A
/// file is written under a hidden temporary name and renamed into place, so a torn one is a
/// damaged disk or someone else's: decoding says which check it failed.
package enum PendingAttachment {
    package static let suffix = ".attachment"
    static let magic = Array("AFTATTCH".utf8)
    static let version: UInt32 = 1
    static let headerSize = 32
    /// The metadata of one attachment is a few hundred bytes; more is not ours.
    static let maximumMetadata = 64 << 10

    /// apsio.attachment.id of a crash's minidump: a UUIDv8 (RFC 9562, vendor-defined) made from
    /// app.crash.id, so every attempt to report the crash names the same attachment, and the
    /// two ids never collide.
    package static func id(forCrash crashID: UUID) -> String {
        let key = Array("aftermath.minidu".utf8)
        var b = zip(crashID.bytes, key).map { $0 ^ $1 }
        b[6] = b[6] & 0x0F | 0x80
        b[8] = b[8] & 0x3F | 0x80
        let uuid = UUID(
            uuid: (b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15])
        )
        return uuid.lowercased
    }

    /// The minidump of crash as its attachment, with what an uploader needs to file it.
    package static func minidump(of crash: CrashReport, bytes: [UInt8]) -> Attachment {
        let id = id(forCrash: crash.context.reportID)
        return Attachment(
            id: id, fileName: id + ".dmp", contentType: "application/octet-stream", bytes: bytes,
            attributes: [
                Attribute("service.name", .string(crash.context.serviceName)),
                Attribute("service.version", .string(crash.context.serviceVersion)),
                Attribute("app.crash.id", .string(crash.context.reportID.lowercased)),
                Attribute("session.id", .string(crash.context.sessionID.lowercased)),
            ])
    }

    private struct Metadata: Codable {
        var id: String
        var file_name: String
        var content_type: String
        var attributes: [[String]]
    }

    package static func encode(_ a: Attachment) -> [UInt8] {
        let meta = Metadata(
            id: a.id, file_name: a.fileName, content_type: a.contentType,
            attributes: a.attributes.compactMap { attr in attr.value.stringValue.map { [attr.key, $0] } })
        // Strings only: encoding cannot fail.
        let json = (try? JSONEncoder().encode(meta)).map { Array($0) } ?? []
        var out = magic
        append(&out, version)
        append(&out, UInt32(json.count))
        append(&out, UInt64(a.bytes.count))
        append(&out, crc(json, a.bytes))
        append(&out, UInt32(0))
        return out + json + a.bytes
    }

    /// The attachment in bytes, the contents of the file named `<expectedID>.attachment`.
    package static func decode(_ bytes: [UInt8], expectedID: String) throws(DecodeError) -> Attachment {
        guard bytes.count >= headerSize else { throw .torn("\(bytes.count) bytes, shorter than its header") }
        guard Array(bytes[0..<8]) == magic else { throw .foreign("not an Aftermath attachment (bad magic)") }
        let v = u32(bytes, 8)
        guard v == version else { throw .foreign("unsupported attachment format version \(v)") }
        let metaSize = Int(u32(bytes, 12))
        let payloadSize = u64(bytes, 16)
        guard metaSize <= maximumMetadata, payloadSize <= UInt64(bytes.count) else {
            throw .torn("sizes (\(metaSize) + \(payloadSize)) exceed the file's \(bytes.count) bytes")
        }
        guard headerSize + metaSize + Int(payloadSize) == bytes.count else {
            throw .torn(
                "header says \(headerSize + metaSize + Int(payloadSize)) bytes, the file has \(bytes.count): torn or damaged"
            )
        }
        let json = Array(bytes[headerSize..<headerSize + metaSize])
        let payload = Array(bytes[(headerSize + metaSize)...])
        let expected = u32(bytes, 24), actual = crc(json, payload)
        guard expected == actual else { throw .torn("checksum mismatch (\(expected) in the header, \(actual) read)") }
        guard let meta = try? JSONDecoder().decode(Metadata.self, from: Data(json)) else {
            throw .foreign("metadata is not an attachment's")
        }
        guard meta.id == expectedID, Attachment.isValidID(meta.id) else {
            throw .foreign("names attachment \(meta.id.prefix(80)), not its file's \(expectedID)")
        }
        return Attachment(
            id: meta.id, fileName: meta.file_name, contentType: meta.content_type, bytes: payload,
            attributes: meta.attributes.compactMap { $0.count == 2 ? Attribute($0[0], .string($0[1])) : nil })
    }

    /// Why a pending attachment file cannot be used.
    package enum DecodeError: Error, CustomStringConvertible {
        /// Cut short or damaged.
        case torn(String)
        /// Not an attachment written by Aftermath.
        case foreign(String)

        package var description: String {
            switch self {
            case .torn(let why): return "torn attachment: \(why)"
            case .foreign(let why): return "foreign file: \(why)"
            }
        }
    }

    private static func crc(_ a: [UInt8], _ b: [UInt8]) -> UInt32 {
        (a + b).withUnsafeBytes { ReportFile.crc32($0) }
    }

    private static func append<T: FixedWidthInteger>(_ out: inout [UInt8], _ v: T) {
        withUnsafeBytes(of: v.littleEndian) { out += $0 }
    }

    private static func u32(_ b: [UInt8], _ o: Int) -> UInt32 {
        (0..<4).reduce(UInt32(0)) { $0 | UInt32(b[o + $1]) << (8 * UInt32($1)) }
    }

    private static func u64(_ b: [UInt8], _ o: Int) -> UInt64 {
        (0..<8).reduce(UInt64(0)) { $0 | UInt64(b[o + $1]) << (8 * UInt64($1)) }
    }
}
