/// A file that goes with a record but is delivered on its own: a crash's minidump, named by
/// the `apsio.attachment.id` attribute of its `app.crash` record.
public struct Attachment: Sendable, Hashable {
    /// The record's `apsio.attachment.id`: the same on every attempt to deliver it.
    public var id: String
    /// The file's name as uploaded, such as `<id>.dmp`.
    public var fileName: String
    /// Its MIME type, such as `application/octet-stream`.
    public var contentType: String
    /// Its contents.
    public var bytes: [UInt8]
    /// What an uploader needs to file it: `service.name`, `service.version`, `app.crash.id`
    /// and `session.id`, as the record carries them.
    public var attributes: [Attribute]

    /// Creates an attachment.
    public init(id: String, fileName: String, contentType: String, bytes: [UInt8], attributes: [Attribute]) {
        self.id = id
        self.fileName = fileName
        self.contentType = contentType
        self.bytes = bytes
        self.attributes = attributes
    }

    /// The string value of the attribute named key, if there is one.
    public func attribute(_ key: String) -> String? {
        attributes.first { $0.key == key }?.value.stringValue
    }

    /// Whether id can name a file: 1 to 64 ASCII letters, digits, `-` and `_`.
    public static func isValidID(_ id: String) -> Bool {
        !id.isEmpty && id.utf8.count <= 64
            && id.utf8.allSatisfy { c in
                (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x2D
                    || c == 0x5F
            }
    }
}
