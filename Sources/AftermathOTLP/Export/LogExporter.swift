#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Sends batches of records somewhere: a collector, a file, memory.
///
/// The contract is acknowledgement: returning normally from ``export(_:)`` means the batch is
/// delivered, and the caller then deletes the reports it was made from. Throwing means it is
/// not: the caller keeps the reports and sends them again on a later attempt, so an exporter
/// must throw whenever it cannot be sure the batch is durably delivered, and a receiver may
/// see a batch more than once (records carry `log.record.uid` to deduplicate). An
/// ``ExportError`` says more through its ``ExportError/kind``: the receiver is unavailable
/// (later batches wait too), or it refused the batch for good (its reports go to `rejected/`).
public protocol LogExporter: Sendable {
    /// Delivers `batch`, returning only once it is acknowledged; throws if it is not.
    func export(_ batch: LogBatch) throws

    /// This exporter as the receiver of attachments, when it is also an
    /// ``AttachmentExporter``; else nil. Provided: an exporter need not implement it.
    var asAttachmentExporter: (any AttachmentExporter)? { get }
}

extension LogExporter {
    /// Nil: this exporter takes no attachments.
    public var asAttachmentExporter: (any AttachmentExporter)? { nil }
}

// Chosen where a type conforms to both, without a dynamic cast (`as?` to a protocol scans every
// image's conformance records the first time: about 0.4 ms of a launch).
extension LogExporter where Self: AttachmentExporter {
    /// This exporter itself.
    public var asAttachmentExporter: (any AttachmentExporter)? { self }
}
