import AftermathNextLaunch
import CSignalShim
import Foundation
import Testing

/// The byte helpers start uses on the strings and C arrays of its context, which work on the
/// bytes where they lie (no array between).
@Suite("Byte helpers: clipping, hex, ids, paths")
struct ByteHelpersTests {
    @Test("A clipped string keeps whole characters and leaves room for the NUL")
    func clippingKeepsCharacters() {
        // "é" is two bytes: a field of 5 (4 bytes and the NUL) keeps "ab" and one "é".
        #expect(CString.clipped("abéé", capacity: 5) == "abé")
        #expect(CString.clipped("abéé", capacity: 4) == "ab")
        #expect(CString.clipped("abc", capacity: 64) == "abc")
        #expect(CString.clipped("abc", capacity: 0) == "")
        var field = aft_context().os_name
        withUnsafeMutableBytes(of: &field) {
            CString.write("日本語", intoBytes: UnsafeMutableRawBufferPointer(rebasing: $0[..<8]))
        }
        #expect(CString.read(&field) == "日本")  // 6 bytes and the NUL in 8
    }

    @Test("Hex of a C array's first bytes, and of raw bytes, equals the sequence's")
    func hexOfBytes() {
        var context = aft_context()
        withUnsafeMutableBytes(of: &context.app_build_id) { raw in
            for i in 0..<raw.count { raw[i] = UInt8(truncatingIfNeeded: i * 37 + 5) }
        }
        let expected = Hex.encode((0..<20).map { UInt8(truncatingIfNeeded: $0 * 37 + 5) })
        #expect(Hex.encode(&context.app_build_id, count: 20) == expected)
        #expect(expected.count == 40 && expected.hasPrefix("052a4f74"))
        #expect(Hex.encode(&context.app_build_id, count: 0) == "")
        #expect(Hex.encode(raw: UnsafeRawBufferPointer(start: nil, count: 0)) == "")
    }

    @Test("A UUID's bytes copied into a C array read back as the same UUID; a short array is zero-filled")
    func uuidBytes() {
        let id = UUID()
        var context = aft_context()
        withUnsafeMutableBytes(of: &context.run_id) { id.copyBytes(into: $0) }
        #expect(UUID(bytes: &context.run_id) == id)
        var short: (UInt8, UInt8) = (0xAB, 0xCD)
        #expect(UUID(bytes: &short).uuidString.hasPrefix("ABCD0000-0000"))
    }

    @Test("A path's parent, as NSString's deletingLastPathComponent gives it (which traps on some here)")
    func parents() {
        let expected = [
            "/a/b/c": "/a/b", "/a/b/c/": "/a/b", "/a//b": "/a", "/a": "/", "/": "/", "a": "", "a/b": "a",
            "": "", "/é/ü/x": "/é/ü", "/srv//reports//": "/srv",
        ]
        for (path, parent) in expected {
            #expect(ReportDirectory.parent(of: path) == parent, "\(path)")
        }
    }
}
