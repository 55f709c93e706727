@_exported import AftermathOTLP
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Sends batches to an OpenTelemetry collector over OTLP/HTTP: `POST /v1/logs` with an
/// `ExportLogsServiceRequest`, protobuf by default (`application/x-protobuf`) or JSON.
///
/// What the collector's answer means for the report files (the OTLP/HTTP rules):
/// - 2xx: delivered, files deleted. A `partialSuccess` is delivered too: the collector decided
///   about the rejected records, and resending cannot change that.
/// - 429, 502, 503, 504 and network errors: retried up to `maxAttempts` times, waiting
///   `Retry-After` (seconds or an HTTP date, at most `maxRetryDelay`) or an exponential backoff;
///   then the export throws and the files are kept for the next attempt.
/// - 400: the collector will never accept this payload; retrying cannot succeed and would hold
///   every later report back, so the batch counts as delivered and its files are deleted.
/// - Any other status (401, 403, 404, 5xx): throws at once; the files are kept.
///
/// `export` blocks its caller (Aftermath calls it on its delivery thread, never the main one).
public struct OTLPHTTPExporter: LogExporter {
    /// The payload encoding.
    public enum Encoding: Sendable, Hashable {
        /// `application/x-protobuf`, the OTLP/HTTP default.
        case protobuf
        /// `application/json` (OTLP/JSON).
        case json
    }

    /// The full logs URL, such as `http://localhost:4318/v1/logs`.
    public var endpoint: URL
    /// The payload encoding.
    public var encoding: Encoding
    /// Extra headers (authentication, for example).
    public var headers: [String: String]
    /// Seconds to wait for one response.
    public var timeout: Double
    /// Attempts for retryable failures, the first included.
    public var maxAttempts: Int
    /// The longest wait before a retry, in seconds, whatever Retry-After says.
    public var maxRetryDelay: Double

    /// An exporter to endpoint (default: a local collector).
    public init(endpoint: URL = URL(string: "http://localhost:4318/v1/logs")!, encoding: Encoding = .protobuf,
                headers: [String: String] = [:], timeout: Double = 10, maxAttempts: Int = 3,
                maxRetryDelay: Double = 30) {
        self.endpoint = endpoint
        self.encoding = encoding
        self.headers = headers
        self.timeout = timeout
        self.maxAttempts = maxAttempts
        self.maxRetryDelay = maxRetryDelay
    }

    public func export(_ batch: LogBatch) throws {
        guard !batch.records.isEmpty else { return }
        let body = encoding == .protobuf ? OTLPProtobuf.encode(batch) : OTLPJSON.encode(batch)
        var problem = ""
        for attempt in 1...max(1, maxAttempts) {
            let response = post(body)
            switch response.status {
            case .some(200..<300), .some(400):
                return
            case .some(429), .some(502), .some(503), .some(504), .none:
                problem = response.status.map { "HTTP \($0)" } ?? (response.error ?? "no response")
                guard attempt < maxAttempts else { break }
                let backoff = 0.5 * Double(1 << min(attempt - 1, 6))
                Thread.sleep(forTimeInterval: min(maxRetryDelay, response.retryAfter ?? backoff))
            case let status?:
                throw ExportError("\(endpoint.absoluteString) answered HTTP \(status): \(response.text)")
            }
        }
        throw ExportError("\(endpoint.absoluteString) not reached after \(maxAttempts) attempts: \(problem)")
    }

    /// One response, or the transport error.
    struct Response: Sendable {
        var status: Int?
        var retryAfter: Double?
        var text: String
        var error: String?
    }

    func post(_ body: [UInt8]) -> Response {
        var request = URLRequest(url: endpoint, timeoutInterval: timeout)
        request.httpMethod = "POST"
        request.httpBody = Data(body)
        request.setValue(encoding == .protobuf ? "application/x-protobuf" : "application/json",
                         forHTTPHeaderField: "Content-Type")
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        let done = DispatchSemaphore(value: 0)
        let box = ResponseBox()
        let task = URLSession.shared.dataTask(with: request) { data, response, error in
            let http = response as? HTTPURLResponse
            box.set(Response(
                status: http?.statusCode,
                retryAfter: http.flatMap { Self.retryAfter($0.value(forHTTPHeaderField: "Retry-After")) },
                text: String(decoding: (data ?? Data()).prefix(512), as: UTF8.self),
                error: error.map { String(describing: $0) }))
            done.signal()
        }
        task.resume()
        if done.wait(timeout: .now() + timeout + 5) == .timedOut {
            task.cancel()
            return Response(status: nil, retryAfter: nil, text: "", error: "timed out")
        }
        return box.get() ?? Response(status: nil, retryAfter: nil, text: "", error: "no response")
    }

    /// Retry-After as seconds: delta-seconds, or an HTTP date.
    package static func retryAfter(_ value: String?) -> Double? {
        guard let value = value?.trimmingCharacters(in: .whitespaces), !value.isEmpty else { return nil }
        if let seconds = Double(value) { return max(0, seconds) }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        return formatter.date(from: value).map { max(0, $0.timeIntervalSinceNow) }
    }

    /// Hands the response from URLSession's queue to the waiting thread.
    final class ResponseBox: @unchecked Sendable {
        private let lock = NSLock()
        private var value: Response?
        func set(_ response: Response) { lock.withLock { value = response } }
        func get() -> Response? { lock.withLock { value } }
    }
}
