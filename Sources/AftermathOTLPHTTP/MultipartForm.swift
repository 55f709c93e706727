/// A `multipart/form-data` body (RFC 7578), as Crashpad's HTTPMultipartBuilder writes it:
/// each part's `Content-Disposition` (and `Content-Type` for files), CRLF line ends, the
/// closing delimiter `--<boundary>--`.
struct MultipartForm {
    /// The Breakpad upload protocol's field for the minidump.
    static let minidumpField = "upload_file_minidump"

    struct Part {
        var name: String
        var fileName: String? = nil
        var contentType: String? = nil
        var bytes: [UInt8]
    }

    /// 128 random bits: a body cannot be expected to contain it.
    let boundary: String
    let body: [UInt8]

    init(parts: [Part]) {
        var random = SystemRandomNumberGenerator()
        let bits = [random.next(), random.next()] as [UInt64]
        boundary = "---AftermathBoundary" + bits.map { hex($0) }.joined()
        var out: [UInt8] = []
        for part in parts {
            var head = "--\(boundary)\r\nContent-Disposition: form-data; name=\"\(Self.quoted(part.name))\""
            if let fileName = part.fileName { head += "; filename=\"\(Self.quoted(fileName))\"" }
            head += "\r\n"
            if let type = part.contentType { head += "Content-Type: \(type)\r\n" }
            out += Array((head + "\r\n").utf8) + part.bytes + Array("\r\n".utf8)
        }
        out += Array("--\(boundary)--\r\n".utf8)
        body = out
    }

    /// A name or file name inside its quotes: `"`, CR and LF percent-encoded (HTML's rule, and
    /// Crashpad's), so it can neither end the quotes nor the header line.
    static func quoted(_ s: String) -> String {
        var out = ""
        for c in s.unicodeScalars {
            switch c {
            case "\"": out += "%22"
            case "\r": out += "%0D"
            case "\n": out += "%0A"
            default: out.unicodeScalars.append(c)
            }
        }
        return out
    }
}

private func hex(_ v: UInt64) -> String {
    let s = String(v, radix: 16)
    return String(repeating: "0", count: 16 - s.count) + s
}
