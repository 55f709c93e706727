import AftermathNextLaunch
import AftermathSymbolication
import Foundation
import Testing
import TestSupport

/// An image without a GNU build id is named by its text hash: the locator matches files by the
/// same hash computed from them.
@Suite("Debug file locator: text hash")
struct TextHashLocatorTests {
    @Test("A file without a note is matched by its text hash; a file with other code is not")
    func matchByTextHash() throws {
        let dir = try Tool.temporaryDirectory("text-hash-locator")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let bare = try TextHashFixture.library("bare", source: TextHashFixture.source(3), buildID: false, in: dir)
        let otherDir = dir + "/other"
        try FileManager.default.createDirectory(atPath: otherDir, withIntermediateDirectories: true)
        let other = try TextHashFixture.library("bare", source: TextHashFixture.source(4), buildID: false, in: otherDir)
        let hash = Hex.encode(try TextHashFixture.textHash(ofFile: bare))
        #expect(DebugFileLocator.textHash(of: bare) == hash)
        #expect(DebugFileLocator.textHash(of: other) != hash)

        let locator = DebugFileLocator(debugDirectories: [], debuginfod: false)
        func reference(_ path: String) -> ImageReference {
            ImageReference(
                name: "libbare.so", path: path, buildID: hash, loadAddress: 0x7f00_0000_0000, isInApp: true,
                isTextHash: true)
        }
        #expect(locator.locate(reference(bare)).binary == bare)
        let mismatch = locator.locate(reference(other))
        #expect(mismatch.binary == nil)
        #expect(mismatch.problems.contains { $0.contains("text hash") && $0.contains(other) })
    }
}
