import CAftermathHTTP
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// One POST through libcurl (CAftermathHTTP): whatever the peer sends, an answer or an error,
/// never a trap. Redirects are returned, not followed.
package enum HTTPClient {
    /// Response body bytes read at most; the rest of a longer body is not read.
    package static let maxResponseBody = 4 << 20

    package struct Response: Sendable {
        /// The status, nil when no complete status line and headers arrived.
        package var status: Int?
        /// A redirect's target, resolved against the request URL.
        package var location: String?
        package var retryAfter: String?
        package var contentType: String
        /// At most ``maxResponseBody`` bytes.
        package var body: [UInt8]
        /// Why the exchange failed, when it did (no status, or the transfer broke off).
        package var error: String?
        package var timedOut: Bool
    }

    /// POSTs body to url with headers ("Name: value"), the whole exchange bounded by
    /// timeoutMilliseconds; https trusts the certificates of caFile, else the system's.
    package static func post(
        _ url: String, headers: [String], body: [UInt8], timeoutMilliseconds: Int,
        caFile: String? = nil
    ) -> Response {
        var response = aft_http_response()
        let prepared: Int32 = withCStrings(headers + [caFile ?? ""]) { all in
            let lines = Array(all.dropLast())
            let ca = caFile == nil ? nil : all.last!
            return lines.withUnsafeBufferPointer { lines in
                body.withUnsafeBufferPointer { body in
                    url.withCString { url in
                        var request = aft_http_request(
                            url: url, headers: lines.baseAddress, header_count: lines.count,
                            body: body.baseAddress, body_size: body.count,
                            timeout_ms: max(1, timeoutMilliseconds), max_body: maxResponseBody, ca_file: ca)
                        return aft_http_post(&request, &response)
                    }
                }
            }
        }
        defer { aft_http_response_free(&response) }
        let bodyBytes = response.body.map { Array(UnsafeBufferPointer(start: $0, count: response.body_size)) } ?? []
        let error = string(&response.error)
        if prepared != 0 {
            return Response(
                status: nil, location: nil, retryAfter: nil, contentType: "", body: [],
                error: error, timedOut: false)
        }
        let location = string(&response.location)
        let retryAfter = string(&response.retry_after)
        return Response(
            status: response.status > 0 ? Int(response.status) : nil,
            location: location.isEmpty ? nil : location,
            retryAfter: retryAfter.isEmpty ? nil : retryAfter,
            contentType: string(&response.content_type),
            body: bodyBytes,
            error: response.transport_error != 0 ? (error.isEmpty ? "transfer failed" : error) : nil,
            timedOut: response.timed_out != 0)
    }

    /// gzip (RFC 1952) of bytes.
    package static func gzip(_ bytes: [UInt8]) -> [UInt8]? {
        var out = [UInt8](repeating: 0, count: aft_gzip_bound(bytes.count))
        let capacity = out.count
        let n = bytes.withUnsafeBufferPointer { input in
            out.withUnsafeMutableBufferPointer { aft_gzip(input.baseAddress, input.count, $0.baseAddress, capacity) }
        }
        guard n > 0 else { return nil }
        out.removeSubrange(n...)
        return out
    }

    /// A fixed-size C char array as a String.
    private static func string<T>(_ field: inout T) -> String {
        withUnsafeBytes(of: &field) { raw in
            String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
        }
    }

    /// body with the strings as NUL-terminated C strings, valid during the call.
    private static func withCStrings<R>(_ strings: [String], _ body: ([UnsafePointer<CChar>?]) -> R) -> R {
        let copies = strings.map { strdup($0) }
        defer { copies.forEach { free($0) } }
        return body(copies.map { UnsafePointer($0) })
    }
}
