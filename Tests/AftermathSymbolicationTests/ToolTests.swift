import Foundation
import Testing
import TestSupport

/// The test support's child runner: a child that does not take its input is an error of the
/// test that started it, never the end of the test process.
@Suite struct ToolTests {
    @Test("A child that exits without reading its stdin: an error naming it, and this process lives on")
    func childIgnoresItsInput() throws {
        // More than a pipe holds: the write is still going when the child has gone (EPIPE).
        let input = Data(repeating: 0x61, count: 1 << 20)
        #expect {
            try Tool.run("/bin/sh", ["-c", "echo gone >&2; exit 3"], input: input)
        } throws: { error in
            let text = String(describing: error)
            return text.contains("did not read its 1048576 bytes") && text.contains("status 3")
                && text.contains("gone")
        }
        let fine = try Tool.run("/bin/sh", ["-c", "wc -c"], input: input)
        #expect(fine.status == 0 && fine.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "1048576")
    }
}
