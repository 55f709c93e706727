import Foundation
import Testing
import AftermathNextLaunch

@Suite("os-release")
struct OSInfoTests {
    @Test("KEY=value lines: quotes, escapes, comments, blanks, CRLF and lines without a key")
    func parse() {
        let text = """
            # a comment
            NAME="Debian GNU/Linux"
              VERSION_ID='12'\r
            PRETTY_NAME="say \\"hi\\" \\\\ there"
            ID=debian
            =novalue
            EMPTY=
            SINGLE='a \\"b'
            BROKEN="unterminated
            """
        let fields = OSInfo.parseOSRelease(text)
        #expect(fields["NAME"] == "Debian GNU/Linux")
        #expect(fields["VERSION_ID"] == "12")
        #expect(fields["PRETTY_NAME"] == "say \"hi\" \\ there")
        #expect(fields["ID"] == "debian")
        #expect(fields["EMPTY"] == "")
        #expect(fields["SINGLE"] == "a \\\"b")
        #expect(fields["BROKEN"] == "\"unterminated")
        #expect(fields[""] == nil)
        #expect(fields.count == 7)
    }

    @Test("This machine: NAME and VERSION_ID of its os-release, or Linux and the kernel")
    func current() {
        let info = OSInfo.current()
        #expect(!info.name.isEmpty && !info.version.isEmpty && !info.kernelRelease.isEmpty)
        let path = ["/etc/os-release", "/usr/lib/os-release"].first { FileManager.default.fileExists(atPath: $0) }
        if let path, let text = try? String(contentsOfFile: path, encoding: .utf8) {
            let fields = OSInfo.parseOSRelease(text)
            #expect(info.name == fields["NAME"] ?? "Linux")
            #expect(info.version == fields["VERSION_ID"] ?? fields["VERSION"] ?? info.kernelRelease)
        }
    }

    @Test("/etc/os-release first, through its link (Debian's is one); a FIFO or device there is skipped")
    func linkedAndHostile() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("osrel-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        for dir in ["etc", "usr/lib", "opt"] {
            try FileManager.default.createDirectory(atPath: root + "/" + dir, withIntermediateDirectories: true)
        }
        try "NAME=\"Vendor\"\nVERSION_ID=7\n".write(
            toFile: root + "/usr/lib/os-release", atomically: false, encoding: .utf8)
        try "NAME=\"Admin\"\nVERSION_ID=9\n".write(toFile: root + "/opt/os-release", atomically: false, encoding: .utf8)
        // os-release(5): /etc/os-release wins over /usr/lib's, and is usually a link.
        let link = root + "/etc/os-release"
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: "../opt/os-release")
        var info = OSInfo.current(root: root)
        #expect(info.name == "Admin" && info.version == "9")
        // A link to a FIFO: not opened for long, not read; /usr/lib's instead.
        try FileManager.default.removeItem(atPath: link)
        #expect(mkfifo(root + "/opt/fifo", 0o600) == 0)
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: "../opt/fifo")
        info = OSInfo.current(root: root)
        #expect(info.name == "Vendor" && info.version == "7")
        // A link to a device that never ends: refused by its kind, not read.
        try FileManager.default.removeItem(atPath: link)
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: "/dev/zero")
        info = OSInfo.current(root: root)
        #expect(info.name == "Vendor" && info.version == "7")
    }

    @Test("A root given with or without its final slash; neither file there: Linux and the kernel's release")
    func rootSpellingsAndNone() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("osrel-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        try FileManager.default.createDirectory(atPath: root + "/usr/lib", withIntermediateDirectories: true)
        try "NAME=Usr\nVERSION_ID=3\n".write(toFile: root + "/usr/lib/os-release", atomically: false, encoding: .utf8)
        for spelling in [root, root + "/"] {
            let info = OSInfo.current(root: spelling)
            #expect(info.name == "Usr" && info.version == "3", "\(spelling)")
        }
        try FileManager.default.removeItem(atPath: root + "/usr/lib/os-release")
        let none = OSInfo.current(root: root)
        #expect(none.name == "Linux" && none.version == none.kernelRelease && !none.kernelRelease.isEmpty)
    }
}
