import Foundation

/// Uploads attachments (crashes' minidumps) with the Breakpad/Crashpad HTTP upload protocol,
/// which Sentry, Backtrace, BugSplat and Socorro accept: one `POST` of `multipart/form-data`
/// with the fields `prod` (service.name), `ver` (service.version), `guid` (the attachment's
/// id: Aftermath keeps no installation id), `app.crash.id`, `session.id`, then ``fields``, then
/// the minidump in `upload_file_minidump` (file name `<id>.dmp`, `application/octet-stream`).
/// With ``gzip`` (the default, as Crashpad's handler) the whole body is compressed
/// (`Content-Encoding: gzip`).
///
/// What the server's answer means for the pending attachment:
/// - 2xx: delivered and deleted; the response body (the server's crash report id, such as
///   Socorro's `CrashID=bp-…`) is returned and kept in ``Aftermath/Delivery/attachments``.
/// - 408, 429, 5xx, no answer within ``timeout``, a network error: kept, tried again at the
///   next delivery (``ExportError/Kind/unavailable``; the attachments after it wait too).
/// - Any other 4xx: refused for good (``ExportError/Kind/rejectedByCollector(_:)``), moved to
///   `rejected/` with the answer and never resent. Crashpad gives up on a failed upload and keeps
///   the report in its database, unsent; a 4xx is the server saying the request itself is wrong.
/// - 3xx and anything else: kept; redirects are not followed (point ``url`` at the final one).
///
/// One attempt per delivery, bounded by ``timeout``; whatever a server sends ends in an answer
/// or an error, never a crash (responses are read up to 4 MiB).
public struct BreakpadUploader: AttachmentExporter {
    /// The upload URL, such as `https://o1.ingest.sentry.io/api/2/minidump/?sentry_key=…`.
    public var url: URL
    /// More form fields, sent after the standard ones and winning over them by name (Socorro
    /// wants `ProductName` and `Version`); `upload_file_minidump` is reserved and skipped.
    public var fields: [String: String]
    /// Extra request headers, such as an authorization token.
    public var headers: [String: String]
    /// Compress the whole body with gzip (`Content-Encoding: gzip`).
    public var gzip: Bool
    /// The longest one upload may take (default 60 s, as Crashpad).
    public var timeout: Duration
    /// PEM certificates trusted for https; nil: the system's.
    package var certificateFile: String?

    /// An uploader posting to url.
    public init(
        url: URL, fields: [String: String] = [:], headers: [String: String] = [:], gzip: Bool = true,
        timeout: Duration = .seconds(60)
    ) {
        self.url = url
        self.fields = fields
        self.headers = headers
        self.gzip = gzip
        self.timeout = timeout
    }

    /// Uploads attachment; returns the server's answer (its crash report id) once it said 2xx.
    public func export(_ attachment: Attachment) throws -> String? {
        let place = "BreakpadUploader: \(OTLPHTTPExporter.display(url))"
        guard let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
            throw ExportError("\(place): not an http or https URL")
        }
        guard Attachment.isValidID(attachment.id) else {
            throw ExportError(
                "\(place): attachment id \(attachment.id.prefix(80)) cannot name a file",
                kind: .rejectedByCollector("attachment id is not 1-64 letters, digits, - or _"))
        }
        for (name, value) in headers where !OTLPHTTPExporter.isHeaderSafe(name, value) {
            throw ExportError("\(place): header \(name.prefix(80)) has characters a header cannot carry")
        }
        let form = MultipartForm(parts: parts(of: attachment))
        var body = form.body
        var lines = ["Content-Type: multipart/form-data; boundary=\(form.boundary)"]
        if gzip, let compressed = HTTPClient.gzip(body) {
            body = compressed
            lines.append("Content-Encoding: gzip")
        }
        lines += headers.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }
        let response = HTTPClient.post(
            url.absoluteString, headers: lines, body: body,
            timeoutMilliseconds: OTLPHTTPExporter.milliseconds(timeout), caFile: certificateFile)
        let answer = OTLPHTTPExporter.printable(String(decoding: response.body, as: UTF8.self), limit: 1024)
        guard let status = response.status else {
            let why =
                response.timedOut
                ? "no answer within \(OTLPHTTPExporter.format(timeout))" : response.error ?? "no answer"
            throw ExportError("\(place): \(why)", kind: .unavailable)
        }
        switch status {
        case 200..<300:
            return answer
        case 408, 429, 500..<600:
            throw ExportError("\(place): HTTP \(status) \(answer)", kind: .unavailable)
        case 400..<500:
            throw ExportError(
                "\(place): HTTP \(status) \(answer)", kind: .rejectedByCollector("HTTP \(status) \(answer)"))
        case 300..<400:
            throw ExportError("\(place): HTTP \(status), a redirect, not followed: point the uploader at the final URL")
        default:
            throw ExportError("\(place): HTTP \(status) \(answer)")
        }
    }

    /// The form's parts in order: the standard fields, the configured ones (each name once, the
    /// configured value winning), the minidump last.
    func parts(of a: Attachment) -> [MultipartForm.Part] {
        var pairs: [(String, String)] = [
            ("prod", a.attribute("service.name") ?? ""), ("ver", a.attribute("service.version") ?? ""),
            ("guid", a.id), ("app.crash.id", a.attribute("app.crash.id") ?? ""),
            ("session.id", a.attribute("session.id") ?? ""),
        ]
        for (name, value) in fields.sorted(by: { $0.key < $1.key }) where name != MultipartForm.minidumpField {
            if let i = pairs.firstIndex(where: { $0.0 == name }) {
                pairs[i].1 = value
            } else {
                pairs.append((name, value))
            }
        }
        return pairs.map { MultipartForm.Part(name: $0.0, bytes: Array($0.1.utf8)) }
            + [
                MultipartForm.Part(
                    name: MultipartForm.minidumpField, fileName: a.id + ".dmp", contentType: "application/octet-stream",
                    bytes: a.bytes)
            ]
    }
}
