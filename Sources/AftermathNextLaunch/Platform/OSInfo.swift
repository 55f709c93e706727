import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The operating system a run is on: os.name and os.version from os-release, and the kernel.
package struct OSInfo: Sendable, Hashable {
    /// os.name: NAME from os-release ("Debian GNU/Linux"), else "Linux".
    package var name: String
    /// os.version: VERSION_ID from os-release ("12"), else the kernel release.
    package var version: String
    /// The kernel release (uname -r).
    package var kernelRelease: String

    /// Reads os-release under root (for tests) and the running kernel's release.
    package static func current(root: String = "/") -> OSInfo {
        var fields: [String: String] = [:]
        for candidate in ["etc/os-release", "usr/lib/os-release"] {
            let path = (root as NSString).appendingPathComponent(candidate)
            if let bytes = try? FileReader.read(path, maximumSize: 64 * 1024) {
                fields = parseOSRelease(String(decoding: bytes, as: UTF8.self))
                break
            }
        }
        let kernel = kernelReleaseString()
        return OSInfo(name: fields["NAME"] ?? "Linux",
                      version: fields["VERSION_ID"] ?? fields["VERSION"] ?? kernel,
                      kernelRelease: kernel)
    }

    /// Parses os-release(5): KEY=value lines, values optionally quoted.
    package static func parseOSRelease(_ text: String) -> [String: String] {
        var out: [String: String] = [:]
        for line in text.split(whereSeparator: \.isNewline) {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            guard !trimmed.hasPrefix("#"), let eq = trimmed.firstIndex(of: "=") else { continue }
            let key = String(trimmed[..<eq])
            var value = String(trimmed[trimmed.index(after: eq)...])
            if value.count >= 2, let first = value.first, first == "\"" || first == "'", value.last == first {
                value = String(value.dropFirst().dropLast())
                value = value.replacingOccurrences(of: "\\\"", with: "\"")
            }
            out[key] = value
        }
        return out
    }

    package static func kernelReleaseString() -> String {
        var u = utsname()
        guard uname(&u) == 0 else { return "" }
        return CString.read(&u.release)
    }
}
