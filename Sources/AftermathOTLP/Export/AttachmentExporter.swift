/// Delivers attachments (a crash's minidump) to a receiver: a directory, a Breakpad/Crashpad
/// upload endpoint.
///
/// The contract is the one of ``LogExporter``: returning means acknowledged, and only then is
/// the pending attachment deleted; throwing keeps it for a later delivery, so a receiver may
/// see an attachment more than once (under the same id). An ``ExportError`` of kind
/// ``ExportError/Kind/unavailable`` holds back the attachments after it until the next
/// delivery; ``ExportError/Kind/rejectedByCollector(_:)`` moves the attachment to `rejected/`
/// with the receiver's message. Attachments go out after the records, one at a time.
public protocol AttachmentExporter: Sendable {
    /// Delivers attachment, returning only once it is acknowledged, with what the receiver
    /// calls it when it says (a crash report id, a file path); throws if it is not delivered.
    func export(_ attachment: Attachment) throws -> String?
}
