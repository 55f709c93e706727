import AftermathNextLaunch
import Foundation
import TestSupport
import Testing

/// StoreFiles.moveNoReplace: one name after a move, never a replaced or followed target.
@Suite("Move without replacing")
struct MoveNoReplaceTests {
    @Test(
        "A move leaves the file under its new name alone (one link); a file or a planted link at the target is never replaced"
    )
    func movesInOneStep() throws {
        let dir = TestSupport.childDirectory("move")
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try TestSupport.write([1, 2, 3], to: dir + "/a")
        #expect(StoreFiles.moveNoReplace(dir + "/a", dir + "/b") == 0)
        var st = stat()
        #expect(lstat(dir + "/b", &st) == 0 && st.st_nlink == 1 && !FileManager.default.fileExists(atPath: dir + "/a"))
        try TestSupport.write([4], to: dir + "/c")
        #expect(StoreFiles.moveNoReplace(dir + "/b", dir + "/c") == EEXIST)
        try FileManager.default.createSymbolicLink(atPath: dir + "/link", withDestinationPath: dir + "/elsewhere")
        #expect(StoreFiles.moveNoReplace(dir + "/b", dir + "/link") == EEXIST)
        #expect(try Data(contentsOf: URL(fileURLWithPath: dir + "/b")) == Data([1, 2, 3]))
        #expect(try Data(contentsOf: URL(fileURLWithPath: dir + "/c")) == Data([4]))
        #expect(!FileManager.default.fileExists(atPath: dir + "/elsewhere"))
    }
}
