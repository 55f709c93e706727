#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// An exporter's failure to deliver a batch. Unless ``kind`` says the receiver refused it for
/// good, the batch's reports are kept for a later attempt.
public struct ExportError: Error, CustomStringConvertible, Sendable {
    /// What the failure means for the reports and for the batches after it.
    public enum Kind: Sendable, Hashable {
        /// This batch was not delivered; its reports are kept, later batches may still go.
        case failed
        /// The receiver could not be reached, did not answer in time, or kept asking to retry:
        /// the reports are kept and later batches wait for the next delivery.
        case unavailable
        /// The receiver refused the batch for good (OTLP/HTTP 400) with this message: resending
        /// cannot succeed, so the reports are moved to `rejected/` with it.
        case rejectedByCollector(String)
    }

    /// What failed, such as `cannot create directory /var/lib/shop/reports`.
    public var message: String
    /// The POSIX `errno` behind the failure, when there is one.
    public var code: Int32?
    /// What the failure means for the reports (default ``Kind/failed``).
    public var kind: Kind

    /// Creates an error with `message` and, optionally, the `errno` that caused it and its kind.
    public init(_ message: String, code: Int32? = nil, kind: Kind = .failed) {
        self.message = message
        self.code = code
        self.kind = kind
    }

    /// The message, followed by the `errno` text and number when there is one.
    public var description: String {
        guard let code else { return message }
        return "\(message): \(String(cString: strerror(code))) (errno \(code))"
    }
}
