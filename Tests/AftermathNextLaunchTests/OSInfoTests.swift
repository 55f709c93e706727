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
}
