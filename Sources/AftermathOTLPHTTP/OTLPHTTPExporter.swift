@_exported import AftermathOTLP
import Foundation

/// Sends batches to an OpenTelemetry collector over OTLP/HTTP: `POST /v1/logs` with an
/// `ExportLogsServiceRequest`, protobuf by default (`application/x-protobuf`) or JSON,
/// optionally gzip-compressed. Configured in code, else by the standard `OTEL_EXPORTER_OTLP_*`
/// environment variables (what is set in code wins).
///
/// What the collector's answer means for the report files (the OTLP/HTTP rules):
/// - 2xx: delivered, files deleted. A `partialSuccess` is delivered too: the collector decided
///   about the rejected records, and resending cannot change that.
/// - 429, 502, 503, 504 and network errors: retried, waiting `Retry-After` (at most
///   `maxRetryDelay`) or an exponential backoff, while attempts and the timeout last; then the
///   files are kept and later batches wait for the next delivery (``ExportError/Kind/unavailable``).
/// - 400: refused for good, never retried; the files go to `rejected/` with the collector's
///   message (``ExportError/Kind/rejectedByCollector(_:)``).
/// - 307, 308: the same POST, body and all, repeated at the new location (at most 5 times);
///   configured headers go only to the endpoint's origin, never from https to http.
/// - 301, 302, 303 (which would turn the POST into a GET) and any other status: the files are kept.
///
/// The timeout bounds one whole export, retries and redirects included. Whatever a peer sends
/// (a cut response, an endless body, silence) ends in an answer or an error, never a crash;
/// response bodies are read up to 4 MiB. `export` blocks its caller (Aftermath calls it on its
/// delivery thread, never the main one).
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
    /// Extra headers (authentication, for example), sent only to the endpoint's origin.
    public var headers: [String: String]
    /// Compress request bodies with gzip (`Content-Encoding: gzip`).
    public var gzip: Bool
    /// The longest one export may take, retries included.
    public var timeout: Duration
    /// Attempts for retryable failures, the first included.
    public var maxAttempts: Int
    /// The longest wait before a retry, whatever Retry-After says.
    public var maxRetryDelay: Duration
    /// Why the environment's configuration cannot be used; every export then throws it.
    package var configurationError: String?
    /// PEM certificates trusted for https (OTEL_EXPORTER_OTLP_CERTIFICATE); nil: the system's.
    package var certificateFile: String?

    /// An exporter. Each parameter left nil comes from the environment (OTEL_EXPORTER_OTLP_LOGS_ENDPOINT,
    /// or OTEL_EXPORTER_OTLP_ENDPOINT + `/v1/logs`; `_PROTOCOL`, `_COMPRESSION`, `_TIMEOUT` in
    /// milliseconds), else from the specification's defaults: `http://localhost:4318/v1/logs`,
    /// protobuf, no compression, 10 s. Headers from `OTEL_EXPORTER_OTLP_(LOGS_)HEADERS` are sent
    /// too, `headers` winning per name; `_CERTIFICATE` names the certificates https trusts.
    public init(
        endpoint: URL? = nil, encoding: Encoding? = nil, headers: [String: String] = [:],
        gzip: Bool? = nil, timeout: Duration? = nil, maxAttempts: Int = 3,
        maxRetryDelay: Duration = .seconds(30)
    ) {
        self.init(
            endpoint: endpoint, encoding: encoding, headers: headers, gzip: gzip, timeout: timeout,
            maxAttempts: maxAttempts, maxRetryDelay: maxRetryDelay,
            environment: OTelEnvironment.current())
    }

    /// The same, reading environment instead of the process's.
    package init(
        endpoint: URL? = nil, encoding: Encoding? = nil, headers: [String: String] = [:],
        gzip: Bool? = nil, timeout: Duration? = nil, maxAttempts: Int = 3,
        maxRetryDelay: Duration = .seconds(30), environment: OTelEnvironment
    ) {
        let settings = Settings(environment)
        self.endpoint = endpoint ?? settings.endpoint
        self.encoding = encoding ?? settings.encoding
        self.gzip = gzip ?? settings.gzip
        self.timeout = timeout ?? settings.timeout
        var merged = settings.headers
        for (name, value) in headers {
            merged = merged.filter { $0.key.lowercased() != name.lowercased() }
            merged[name] = value
        }
        self.headers = merged
        self.maxAttempts = maxAttempts
        self.maxRetryDelay = maxRetryDelay
        certificateFile = settings.certificateFile
        // A problem only with a setting the code replaced does not matter.
        var problems: [String] = []
        if endpoint == nil, let p = settings.endpointProblem { problems.append(p) }
        if encoding == nil, let p = settings.encodingProblem { problems.append(p) }
        if gzip == nil, let p = settings.gzipProblem { problems.append(p) }
        if timeout == nil, let p = settings.timeoutProblem { problems.append(p) }
        configurationError = problems.isEmpty ? nil : problems.joined(separator: "; ")
    }

    /// Redirects followed at most in one export.
    static let maxRedirects = 5

    public func export(_ batch: LogBatch) throws {
        if let configurationError { throw ExportError(configurationError) }
        guard !batch.records.isEmpty else { return }
        guard ["http", "https"].contains(endpoint.scheme?.lowercased() ?? "") else {
            throw ExportError("the endpoint \(Self.display(endpoint)) is not an http or https URL")
        }
        var body = encoding == .protobuf ? OTLPProtobuf.encode(batch) : OTLPJSON.encode(batch)
        var fixed = [
            "Content-Type: " + (encoding == .protobuf ? "application/x-protobuf" : "application/json"),
            "User-Agent: Aftermath-OTLP-HTTP",
        ]
        if gzip {
            guard let compressed = HTTPClient.gzip(body) else { throw ExportError("gzip failed") }
            body = compressed
            fixed.append("Content-Encoding: gzip")
        }
        let reserved: Set<String> = [
            "content-type", "content-encoding", "content-length", "host", "expect", "transfer-encoding",
        ]
        var configured: [String] = []
        for (name, value) in headers.sorted(by: { $0.key < $1.key }) where !reserved.contains(name.lowercased()) {
            guard Self.isHeaderSafe(name, value) else {
                throw ExportError(
                    "the header \(Self.printable(name, limit: 64)) is not valid: a name with blanks, a colon or control characters, or a value with a line break"
                )
            }
            configured.append("\(name): \(value)")
        }

        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        let origin = Self.origin(endpoint)
        var url = endpoint
        var attempt = 1
        var redirects = 0
        while true {
            let remaining = clock.now.duration(to: deadline)
            guard remaining > .zero else {
                throw ExportError(
                    "\(Self.display(endpoint)) did not answer within \(Self.format(timeout))", kind: .unavailable)
            }
            let sameOrigin = Self.origin(url) == origin
            let response = HTTPClient.post(
                url.absoluteString, headers: fixed + (sameOrigin ? configured : []), body: body,
                timeoutMilliseconds: Self.milliseconds(remaining), caFile: certificateFile)
            let problem: String
            switch response.status {
            case .some(200..<300) where response.error == nil:
                return
            case .some(307), .some(308):
                redirects += 1
                guard redirects <= Self.maxRedirects else {
                    throw ExportError("\(Self.display(endpoint)): more than \(Self.maxRedirects) redirects")
                }
                guard let location = response.location.flatMap(URL.init(string:)),
                    let scheme = location.scheme?.lowercased(), ["http", "https"].contains(scheme)
                else {
                    throw ExportError(
                        "\(Self.display(url)) answered HTTP \(response.status!) without a usable Location")
                }
                guard !(url.scheme?.lowercased() == "https" && scheme == "http") else {
                    throw ExportError(
                        "\(Self.display(url)) redirected from https to http (\(Self.display(location))): not followed")
                }
                url = location
                continue
            case .some(400):
                let message = Self.collectorMessage(response)
                throw ExportError(
                    "\(Self.display(url)) refused the batch (HTTP 400): \(message)",
                    kind: .rejectedByCollector(message))
            case .some(429), .some(502), .some(503), .some(504):
                problem = "HTTP \(response.status!)"
            case .some(let status) where response.error == nil || status >= 300:
                let moved =
                    (300..<400).contains(status)
                    ? response.location.map {
                        " (moved to \($0); a POST is not repeated there for this status: set that endpoint)"
                    } ?? "" : ""
                throw ExportError(
                    "\(Self.display(url)) answered HTTP \(status)\(moved): \(Self.collectorMessage(response))")
            default:
                if response.timedOut {
                    throw ExportError(
                        "\(Self.display(endpoint)) did not answer within \(Self.format(timeout))", kind: .unavailable)
                }
                problem = response.error ?? "no response"
            }
            guard attempt < max(1, maxAttempts) else {
                throw ExportError(
                    "\(Self.display(endpoint)) not reached after \(attempt) attempts: \(problem)", kind: .unavailable)
            }
            let backoff = Duration.milliseconds(500 * (1 << min(attempt - 1, 6)))
            let wait = min(
                maxRetryDelay,
                Self.retryAfter(response.retryAfter).map { Duration.milliseconds(Int64($0 * 1000)) } ?? backoff)
            guard clock.now.advanced(by: wait) < deadline else {
                throw ExportError(
                    "\(Self.display(endpoint)) not reached within \(Self.format(timeout)) (\(attempt) attempts): \(problem)",
                    kind: .unavailable)
            }
            Thread.sleep(forTimeInterval: Self.seconds(wait))
            attempt += 1
        }
    }
}
