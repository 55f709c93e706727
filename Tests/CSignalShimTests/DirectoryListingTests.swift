import CSignalShim
import Foundation
import TestSupport
import Testing

/// Directory listings without a DIR (aft_dir_reader, and the cursor start's reserve and thread
/// passes share with it): every entry once, however many reads of the buffer it takes.
@Suite("Directory listing")
struct DirectoryListingTests {
    static func listed(_ path: String) -> (names: [String], error: Int32) {
        var reader = aft_dir_reader()
        let status = aft_dir_reader_open(&reader, path)
        guard status == 0 else { return ([], status) }
        defer { aft_dir_reader_close(&reader) }
        var names: [String] = []
        var inode: UInt64 = 0
        var type: UInt8 = 0
        errno = 0
        while let name = aft_dir_reader_next(&reader, &inode, &type) { names.append(String(cString: name)) }
        return (names, errno)
    }

    @Test("A directory of 600 long names is listed whole, each name once (several getdents64 reads)")
    func manyEntries() throws {
        let dir = TestSupport.childDirectory("listing")
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let names = (0..<600).map { String(format: "%04d-", $0) + String(repeating: "n", count: 40) }
        for name in names { #expect(FileManager.default.createFile(atPath: dir + "/" + name, contents: nil)) }
        let (seen, error) = Self.listed(dir)
        #expect(error == 0)
        #expect(seen.filter { !$0.hasPrefix(".") }.sorted() == names)
    }

    @Test("A path that is not a directory, or a link to one, is refused with its errno, not listed")
    func refusals() throws {
        let dir = TestSupport.childDirectory("listing-refused")
        try FileManager.default.createDirectory(atPath: dir + "/real", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        #expect(FileManager.default.createFile(atPath: dir + "/file", contents: nil))
        try FileManager.default.createSymbolicLink(atPath: dir + "/link", withDestinationPath: dir + "/real")
        #expect(Self.listed(dir + "/file").error == ENOTDIR)
        #expect(Self.listed(dir + "/link").error == ELOOP || Self.listed(dir + "/link").error == ENOTDIR)
        #expect(Self.listed(dir + "/missing").error == ENOENT)
    }
}
