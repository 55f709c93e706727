import AftermathNextLaunch
import Foundation
import Testing

/// The report directory's paths are joined and split without NSString (start builds them), and
/// must still be what NSString's path methods give.
@Suite("Report directory paths")
struct ReportDirectoryPathTests {
    @Test(
        "A parent is NSString's deletingLastPathComponent",
        arguments: ["/tmp/a/b", "/tmp/a/b/", "/tmp", "/", "a/b", "/var/tmp/aftermath-0/shop"])
    func parent(_ path: String) {
        #expect(ReportDirectory.parent(of: path) == (path as NSString).deletingLastPathComponent)
    }

    @Test("An empty path and a bare name have an empty parent (Foundation traps on both)")
    func emptyParent() {
        #expect(ReportDirectory.parent(of: "").isEmpty)
        #expect(ReportDirectory.parent(of: "reports").isEmpty)
    }

    @Test(
        "A sub-directory is NSString's appendingPathComponent",
        arguments: ["/tmp/reports", "/tmp/reports/", "reports", "/"])
    func join(_ root: String) {
        let directory = ReportDirectory(root: root)
        #expect(directory.crashes == (root as NSString).appendingPathComponent("crashes"))
        #expect(directory.runs == (root as NSString).appendingPathComponent("runs"))
    }
}
