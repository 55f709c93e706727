import CSignalShim
import AftermathNextLaunch
import TestSupport
import Foundation
import Testing

/// Images linked without a GNU build-id note get the text hash of their first executable
/// segment, read from memory, and say so in their flags; images with a note keep it.
@Suite("Text hash of images without a build id")
struct TextHashTests {
    @Test("A library loaded after start: maps and aft_build_id_at give the hash, flagged; a noted one keeps its id")
    func loadedLater() throws {
        let dir = try Tool.temporaryDirectory("text-hash")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let bare = try TextHashFixture.library("bare", source: TextHashFixture.source(3), buildID: false, in: dir)
        let noted = try TextHashFixture.library("noted", source: TextHashFixture.source(5), buildID: true, in: dir)
        for path in [bare, noted] { _ = try #require(dlopen(path, RTLD_NOW), "dlopen \(path)") }
        let expected = try TextHashFixture.textHash(ofFile: bare)

        let fd = open("/proc/self/maps", O_RDONLY)
        defer { close(fd) }
        var images = [aft_image](repeating: aft_image(), count: Int(AFT_MAX_IMAGES))
        var truncated: UInt32 = 0
        let n = aft_images_from_maps_fd(fd, &images, UInt32(images.count), 1, nil, &truncated)
        let found = images.prefix(Int(n))
        let bareImage = try #require(found.first { LoadedImage($0).path == bare })
        #expect(bareImage.build_id_size == AFT_TEXT_HASH_SIZE)
        #expect(bareImage.flags & UInt32(AFT_IMAGE_BUILD_ID_TEXT_HASH) != 0)
        #expect(LoadedImage(bareImage).buildID == Hex.encode(expected))
        #expect(LoadedImage(bareImage).isBuildIDTextHash)

        let notedImage = try #require(found.first { LoadedImage($0).path == noted })
        #expect(notedImage.build_id_size == 20)
        #expect(notedImage.flags & UInt32(AFT_IMAGE_BUILD_ID_TEXT_HASH) == 0)
        #expect(!LoadedImage(notedImage).isBuildIDTextHash)

        var out = [UInt8](repeating: 0, count: Int(AFT_BUILD_ID_CAPACITY))
        var bias: UInt64 = 0
        var flags: UInt32 = 0
        let size = aft_build_id_at(bareImage.start, &out, UInt32(out.count), &bias, &flags)
        #expect(Array(out.prefix(Int(size))) == expected)
        #expect(flags == UInt32(AFT_IMAGE_BUILD_ID_TEXT_HASH))
    }
}
