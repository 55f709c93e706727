#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// An exporter's failure to deliver a batch; the batch's reports are kept for a later attempt.
public struct ExportError: Error, CustomStringConvertible, Sendable {
    /// What failed, such as `cannot create directory /var/lib/shop/reports`.
    public var message: String
    /// The POSIX `errno` behind the failure, when there is one.
    public var code: Int32?

    /// Creates an error with `message` and, optionally, the `errno` that caused it.
    public init(_ message: String, code: Int32? = nil) {
        self.message = message
        self.code = code
    }

    /// The message, followed by the `errno` text and number when there is one.
    public var description: String {
        guard let code else { return message }
        return "\(message): \(String(cString: strerror(code))) (errno \(code))"
    }
}
