import Foundation

extension OTLPHTTPExporter {
    /// The collector's message in a failure response, bounded: the `message` of the OTLP
    /// `Status` (protobuf or JSON, as the response says), else the body as text. Control
    /// characters become spaces, so it can go into a reason file and a terminal as is.
    package static func collectorMessage(_ response: HTTPClient.Response) -> String {
        let body = response.body
        var message: String?
        if response.contentType.lowercased().contains("protobuf") {
            message = statusMessage(protobuf: body)
        } else if response.contentType.lowercased().contains("json"),
            let object = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any]
        {
            message = object["message"] as? String
        }
        let text = message ?? String(decoding: body.prefix(maxMessageBytes), as: UTF8.self)
        let trimmed = printable(text, limit: maxMessageBytes)
        return trimmed.isEmpty ? "no message" : trimmed
    }

    /// The longest collector message kept, in UTF-8 bytes.
    package static let maxMessageBytes = 4096

    /// Field 2 (message) of a protobuf `google.rpc.Status`; nil when the bytes are not one.
    static func statusMessage(protobuf bytes: [UInt8]) -> String? {
        var i = 0
        func varint() -> UInt64? {
            var value: UInt64 = 0, shift: UInt64 = 0
            while i < bytes.count, shift < 64 {
                let b = bytes[i]
                i += 1
                value |= UInt64(b & 0x7F) << shift
                if b & 0x80 == 0 { return value }
                shift += 7
            }
            return nil
        }
        var message: String?
        while i < bytes.count {
            guard let key = varint() else { return nil }
            switch key & 7 {
            case 0: guard varint() != nil else { return nil }
            case 1: i += 8
            case 5: i += 4
            case 2:
                guard let length = varint(), length <= UInt64(bytes.count - i) else { return nil }
                if key >> 3 == 2 { message = String(decoding: bytes[i..<i + Int(length)], as: UTF8.self) }
                i += Int(length)
            default: return nil
            }
            guard i <= bytes.count else { return nil }
        }
        return message
    }

    /// text with control characters as spaces, cut to limit UTF-8 bytes at a character boundary.
    static func printable(_ text: String, limit: Int) -> String {
        var out = ""
        var used = 0
        for scalar in text.unicodeScalars {
            let c: Unicode.Scalar = scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) ? " " : scalar
            let size = String(c).utf8.count
            guard used + size <= limit else { break }
            out.unicodeScalars.append(c)
            used += size
        }
        return out.trimmingCharacters(in: .whitespaces)
    }

    /// A header line cannot be split or smuggled: no CR, LF, NUL or other controls but tab.
    static func isHeaderSafe(_ name: String, _ value: String) -> Bool {
        !name.isEmpty && !name.unicodeScalars.contains { $0.value <= 0x20 || $0 == ":" || $0.value == 0x7F }
            && !value.unicodeScalars.contains { ($0.value < 0x20 && $0 != "\t") || $0.value == 0x7F }
    }

    /// url for messages: without a user name or password it may carry.
    static func display(_ url: URL) -> String {
        guard var parts = URLComponents(url: url, resolvingAgainstBaseURL: false),
            parts.user != nil || parts.password != nil
        else { return url.absoluteString }
        parts.user = nil
        parts.password = nil
        return parts.string ?? "\(url.scheme ?? "")://\(url.host ?? "")"
    }

    /// scheme://host:port, the unit configured headers are confined to.
    static func origin(_ url: URL) -> String {
        let scheme = url.scheme?.lowercased() ?? ""
        let port = url.port ?? (scheme == "https" ? 443 : 80)
        return "\(scheme)://\(url.host?.lowercased() ?? ""):\(port)"
    }

    static func seconds(_ d: Duration) -> Double {
        let (s, atto) = d.components
        return Double(s) + Double(atto) / 1e18
    }

    static func milliseconds(_ d: Duration) -> Int {
        let ms = seconds(d) * 1000
        return ms >= Double(Int32.max) ? Int(Int32.max) : max(1, Int(ms.rounded(.up)))
    }

    static func format(_ d: Duration) -> String {
        let s = seconds(d)
        return s < 1 ? "\(Int((s * 1000).rounded())) ms" : s == s.rounded() ? "\(Int(s)) s" : "\(s) s"
    }

    /// Retry-After as seconds: delta-seconds, or an HTTP date.
    package static func retryAfter(_ value: String?) -> Double? {
        guard let value = value?.trimmingCharacters(in: .whitespaces), !value.isEmpty else { return nil }
        if let seconds = Double(value) { return seconds.isFinite ? min(max(0, seconds), 1e9) : nil }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        return formatter.date(from: value).map { max(0, $0.timeIntervalSinceNow) }
    }
}
