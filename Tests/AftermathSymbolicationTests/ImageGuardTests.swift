import Foundation
import Testing
import AftermathNextLaunch
import AftermathSymbolication
import TestSupport

/// Image paths named by a crash file are opened by `aftermath show`: only regular files,
/// bounded in size, and read only once their build id is the image's.
@Suite("Image guard")
struct ImageGuardTests {
    /// A sparse file of `size` bytes dressed as an x86-64 ELF: a PT_LOAD, a PT_NOTE with build
    /// id `buildID`, and a .symtab covering almost all of it.
    static func dressedELF(_ path: String, size: UInt64, buildID: [UInt8]) throws {
        var b = [UInt8](repeating: 0, count: 4096)
        func put<T: FixedWidthInteger>(_ v: T, _ at: Int) {
            withUnsafeBytes(of: v.littleEndian) { b.replaceSubrange(at..<at + $0.count, with: $0) }
        }
        b.replaceSubrange(0..<4, with: [0x7f, 0x45, 0x4c, 0x46])
        b[4] = 2
        b[5] = 1
        b[6] = 1
        put(UInt16(3), 16)
        put(UInt16(62), 18)
        put(UInt32(1), 20)
        put(UInt64(64), 32)  // e_phoff
        put(UInt64(1024), 40)  // e_shoff
        put(UInt16(64), 52)
        put(UInt16(56), 54)
        put(UInt16(2), 56)
        put(UInt16(64), 58)
        put(UInt16(4), 60)
        // PT_LOAD
        put(UInt32(1), 64)
        put(UInt64(0), 72)
        put(UInt64(0), 80)
        put(UInt64(4096), 96)
        put(UInt64(4096), 112)
        // PT_NOTE at 512
        put(UInt32(4), 120)
        put(UInt64(512), 128)
        put(UInt64(16 + buildID.count), 152)
        put(UInt64(4), 168)
        put(UInt32(4), 512)
        put(UInt32(buildID.count), 516)
        put(UInt32(3), 520)
        b.replaceSubrange(524..<528, with: [0x47, 0x4e, 0x55, 0])
        b.replaceSubrange(528..<528 + buildID.count, with: buildID)
        // sections: null, .symtab (link 2) over the whole file, .strtab, the note
        let sh1 = 1024 + 64, sh2 = 1024 + 128
        put(UInt32(2), sh1 + 4)
        put(UInt64(4096), sh1 + 24)
        put(UInt64(size - 8192), sh1 + 32)
        put(UInt32(2), sh1 + 40)
        put(UInt64(24), sh1 + 56)
        put(UInt32(3), sh2 + 4)
        put(UInt64(size - 4096), sh2 + 24)
        put(UInt64(16), sh2 + 32)
        let sh3 = 1024 + 192  // SHT_NOTE over the same note (libelf looks at sections first)
        put(UInt32(7), sh3 + 4)
        put(UInt64(512), sh3 + 24)
        put(UInt64(16 + buildID.count), sh3 + 32)
        put(UInt64(4), sh3 + 48)
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        defer { close(fd) }
        #expect(b.withUnsafeBytes { write(fd, $0.baseAddress!, $0.count) } == 4096)
        #expect(ftruncate(fd, off_t(size)) == 0)
    }

    @Test("A 1 GiB sparse file dressed as ELF with another build id: refused unread, memory flat")
    func sparseDressedFile() async throws {
        let path = TestSupport.childDirectory("dressed")
        try Self.dressedELF(path, size: 1 << 30, buildID: [1, 2, 3, 4])
        defer { unlink(path) }
        #if compiler(>=6.2)  // exit tests (#expect(processExitsWith:)) need Swift 6.2
        // In a child: its peak RSS is its own.
        await #expect(processExitsWith: .success) { [path = path as String] in
            var usage = rusage()
            getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
            let before = usage.ru_maxrss
            let frame = Symbolicator().symbolicate(
                address: 0x1000, imagePath: path, loadAddress: 0,
                isReturnAddress: false, expectedBuildID: [9, 9, 9, 9])
            getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
            exit(frame == nil && usage.ru_maxrss - before < 64 * 1024 ? 0 : 1)
        }
        #endif
        #expect(throws: ELFError.buildIDMismatch) { try ELFSymbolTable(path: path, expectedBuildID: [9, 9, 9, 9]) }
    }

    @Test("Files larger than 2 GiB are refused unread, by the symbol table and by libdw's locator")
    func tooLarge() throws {
        let path = TestSupport.childDirectory("huge")
        try Self.dressedELF(path, size: 3 << 30, buildID: [1, 2, 3, 4])
        defer { unlink(path) }
        #expect(throws: ELFError.tooLarge(path: path, size: 3 << 30)) { try ELFSymbolTable(path: path) }
        #expect(DebugFileLocator.buildID(of: path) == nil)
        let small = TestSupport.childDirectory("small")
        try Self.dressedELF(small, size: 1 << 20, buildID: [1, 2, 3, 4])
        defer { unlink(small) }
        #expect(DebugFileLocator.buildID(of: small) == "01020304")
    }
}
