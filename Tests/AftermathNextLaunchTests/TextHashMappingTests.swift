import AftermathNextLaunch
import AftermathOTLP
import CSignalShim
import Foundation
import Testing

/// A text hash (an image without a GNU build id) is named as such in the records; a real
/// build id is not.
@Suite("Text hash in records")
struct TextHashMappingTests {
    static func image(start: UInt64, path: String, id: [UInt8], flags: UInt32) -> aft_image {
        var i = aft_image()
        i.start = start
        i.end = start + 0x1000
        i.flags = flags
        i.build_id_size = UInt32(id.count)
        withUnsafeMutableBytes(of: &i.build_id) { $0.copyBytes(from: id) }
        withUnsafeMutableBytes(of: &i.path) { $0.copyBytes(from: Array(path.utf8)) }
        return i
    }

    @Test("apsio.crash.images: build_id_type only for the image with a text hash")
    func imagesJSON() throws {
        let hash = [UInt8](0..<16), gnu = [UInt8](repeating: 0xab, count: 20)
        let images = [
            Self.image(
                start: 0x1000, path: "/app/bin/app", id: hash,
                flags: UInt32(AFT_IMAGE_MAIN_EXECUTABLE | AFT_IMAGE_BUILD_ID_TEXT_HASH)),
            Self.image(start: 0x9000, path: "/lib/libc.so.6", id: gnu, flags: UInt32(AFT_IMAGE_BUILD_ID_FROM_MEMORY)),
        ].map(LoadedImage.init)
        let json = StackFormatter.imagesJSON(frames: [0x9010], images: images, appRoot: "/app")
        let entries = try #require(JSONSerialization.jsonObject(with: Data(json.utf8)) as? [[String: Any]])
        let app = try #require(entries.first { $0["name"] as? String == "app" })
        #expect(app["build_id"] as? String == "000102030405060708090a0b0c0d0e0f")
        #expect(app["build_id_type"] as? String == "text_hash")
        let libc = try #require(entries.first { $0["name"] as? String == "libc.so.6" })
        #expect(libc["build_id"] as? String == String(repeating: "ab", count: 20))
        #expect(libc["build_id_type"] == nil)
    }

    /// A context as a file records it, with app_build_id = id and the text-hash marker when asked.
    static func context(id: [UInt8], marker: Bool) -> ReportContext {
        var c = aft_context()
        c.app_build_id_size = UInt32(id.count)
        withUnsafeMutableBytes(of: &c.app_build_id) { raw in
            raw.copyBytes(from: id + (marker ? ReportContext.textHashMarker : []))
        }
        return ReportContext(c)
    }

    @Test("apsio.app.build_id_type accompanies app.build_id only when it is a text hash")
    func appBuildIDType() {
        let hash = [UInt8](repeating: 0x5a, count: 16)
        let hashed = RecordMapper.runAttributes(Self.context(id: hash, marker: true))
        #expect(hashed.first { $0.key == "app.build_id" }?.value.stringValue == Hex.encode(hash))
        #expect(hashed.first { $0.key == "apsio.app.build_id_type" }?.value.stringValue == "text_hash")
        // A 16-byte GNU build id (--build-id=md5) has no marker after it.
        let md5 = RecordMapper.runAttributes(Self.context(id: hash, marker: false))
        #expect(md5.first { $0.key == "app.build_id" }?.value.stringValue == Hex.encode(hash))
        #expect(!md5.contains { $0.key == "apsio.app.build_id_type" })
        let none = RecordMapper.runAttributes(Self.context(id: [], marker: false))
        #expect(!none.contains { $0.key == "app.build_id" || $0.key == "apsio.app.build_id_type" })
    }
}
