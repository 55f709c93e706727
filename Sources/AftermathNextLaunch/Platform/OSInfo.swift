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

    package init(name: String, version: String, kernelRelease: String) {
        self.name = name
        self.version = version
        self.kernelRelease = kernelRelease
    }

    /// Reads os-release under root (for tests) and the running kernel's release.
    package static func current(root: String = "/") -> OSInfo {
        var name: String?, versionID: String?, version: String?
        // Bytes, not Characters: a String's suffix check would load its grapheme breaking.
        let base = root.utf8.last == UInt8(ascii: "/") ? root : root + "/"
        for candidate in ["etc/os-release", "usr/lib/os-release"] {
            // A system file, its link followed (Debian's /etc/os-release is one); still only
            // a regular file of at most 64 KiB is read, into memory of the read's own: no array
            // (FileReader.withBytes).
            let fd = open(base + candidate, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
            guard fd >= 0 else { continue }
            defer { close(fd) }
            let read: Void? = try? FileReader.withBytes(fd: fd, maximumSize: 64 * 1024) { raw in
                // No dictionary: start reads this on the app's thread, and the first
                // Dictionary<String, String> of a process costs a protocol-conformance scan.
                visitOSRelease(raw) { key, value in
                    if key.elementsEqual("NAME".utf8) { name = value }
                    if key.elementsEqual("VERSION_ID".utf8) { versionID = value }
                    if key.elementsEqual("VERSION".utf8) { version = value }
                }
            }
            if read != nil { break }
        }
        let kernel = kernelReleaseString()
        return OSInfo(name: name ?? "Linux", version: versionID ?? version ?? kernel, kernelRelease: kernel)
    }

    /// Parses os-release(5): KEY=value lines, values optionally quoted ('single' taken as is,
    /// "double" with backslash escapes). Works on bytes: `start` reads this on the app's
    /// thread, and Foundation's string scanning would cost it most of a millisecond.
    package static func parseOSRelease(_ text: String) -> [String: String] {
        var out: [String: String] = [:]
        Array(text.utf8).withUnsafeBytes { raw in
            visitOSRelease(raw) { key, value in
                out[String(decoding: key, as: UTF8.self)] = value
            }
        }
        return out
    }

    /// Calls visit with each KEY and its unquoted value, in file order. The value is built as a
    /// String from the file's bytes, with no array of its own: start's first [UInt8] made here
    /// had the runtime build the array storage's type by name.
    package static func visitOSRelease(
        _ bytes: UnsafeRawBufferPointer, _ visit: (Slice<UnsafeRawBufferPointer>, String) -> Void
    ) {
        let newline = UInt8(ascii: "\n"), cr = UInt8(ascii: "\r"), space = UInt8(ascii: " "), tab = UInt8(ascii: "\t")
        let equals = UInt8(ascii: "="), hash = UInt8(ascii: "#"), double = UInt8(ascii: "\""),
            single = UInt8(ascii: "'")
        let backslash = UInt8(ascii: "\\")
        var lineStart = 0
        while lineStart < bytes.count {
            var lineEnd = lineStart
            while lineEnd < bytes.count && bytes[lineEnd] != newline { lineEnd += 1 }
            var a = lineStart, b = lineEnd
            lineStart = lineEnd + 1
            while a < b && (bytes[a] == space || bytes[a] == tab) { a += 1 }
            while b > a && (bytes[b - 1] == space || bytes[b - 1] == tab || bytes[b - 1] == cr) { b -= 1 }
            guard a < b, bytes[a] != hash, let eq = bytes[a..<b].firstIndex(of: equals), eq > a else { continue }
            var v = eq + 1, vEnd = b
            var value = ""
            if vEnd - v >= 2, bytes[v] == double || bytes[v] == single, bytes[vEnd - 1] == bytes[v] {
                let quote = bytes[v]
                v += 1
                vEnd -= 1
                // The runs between backslashes as they are; a backslash in double quotes keeps
                // the byte after it.
                var run = v
                while v < vEnd {
                    if quote == double && bytes[v] == backslash && v + 1 < vEnd {
                        value += String(decoding: bytes[run..<v], as: UTF8.self)
                        run = v + 1
                        v += 2
                        continue
                    }
                    v += 1
                }
                value += String(decoding: bytes[run..<vEnd], as: UTF8.self)
            } else {
                value = String(decoding: bytes[v..<vEnd], as: UTF8.self)
            }
            visit(bytes[a..<eq], value)
        }
    }

    package static func kernelReleaseString() -> String {
        var u = utsname()
        guard uname(&u) == 0 else { return "" }
        return CString.read(&u.release)
    }
}
