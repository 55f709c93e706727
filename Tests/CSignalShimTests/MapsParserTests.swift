import CSignalShim
import CHarnessFaults
import AftermathNextLaunch
import AftermathSymbolication
import TestSupport
import Foundation
import Testing

/// The crash-time /proc/self/maps parser, fed crafted maps through its fd entry point.
@Suite("Maps parser")
struct MapsParserTests {
    func parse(
        _ text: String, main: String = "/opt/app/bin/app", capacity: Int = 64
    ) throws -> (images: [LoadedImage], truncated: Bool) {
        var fds: [Int32] = [0, 0]
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("maps-\(UUID())").path
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        defer { unlink(path) }
        let fd = open(path, O_RDONLY)
        fds[0] = fd
        defer { close(fd) }
        var images = [aft_image](repeating: aft_image(), count: capacity)
        var truncated: UInt32 = 0
        let n = main.withCString { aft_images_from_maps_fd(fd, &images, UInt32(capacity), 0, $0, &truncated) }
        return (images.prefix(Int(n)).map(LoadedImage.init), truncated != 0)
    }

    /// The main executable's PT_TLS size (from /proc/self/exe): static thread-local storage every
    /// thread of the app gets, zero-filled at each thread's creation; Aftermath's C is linked in.
    static func executableTLSBytes() throws -> UInt64 {
        let elf = [UInt8](try Data(contentsOf: URL(fileURLWithPath: "/proc/self/exe")))
        func u(_ at: Int, _ size: Int) -> UInt64 {
            (0..<size).reduce(0) { $0 | UInt64(elf[at + $1]) << (8 * UInt64($1)) }
        }
        try #require(elf.count > 64 && elf[0..<4] == [0x7f, 0x45, 0x4c, 0x46] && elf[4] == 2, "a 64-bit ELF")
        let phoff = Int(u(0x20, 8)), phentsize = Int(u(0x36, 2)), phnum = Int(u(0x38, 2))
        for i in 0..<phnum {
            let at = phoff + i * phentsize
            if u(at, 4) == 7 { return u(at + 0x28, 8) }  // PT_TLS: its p_memsz
        }
        return 0
    }

    @Test("The parser's scratch is no thread-local: an app's every thread pays under 1 KiB of static TLS for Aftermath")
    func noThreadLocalScratch() throws {
        var images = [aft_image](repeating: aft_image(), count: 64)
        var truncated: UInt32 = 0
        let fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC)
        try #require(fd >= 0)
        defer { close(fd) }
        let n = aft_images_from_maps_fd(fd, &images, 64, 0, CommandLine.arguments[0], &truncated)
        #expect(n > 0, "this process's images read")
        let tls = try Self.executableTLSBytes()
        #expect(tls < 1024, "\(tls) bytes of TLS in each thread")
    }

    @Test("Segments of one file merge into one image; data files and anonymous maps are dropped")
    func merging() throws {
        let maps = """
            55d1c2a00000-55d1c2a01000 r--p 00000000 fd:01 1234                       /opt/app/bin/app
            55d1c2a01000-55d1c2a05000 r-xp 00001000 fd:01 1234                       /opt/app/bin/app
            55d1c2a05000-55d1c2a06000 r--p 00005000 fd:01 1234                       /opt/app/bin/app
            55d1c2a06000-55d1c2a07000 rw-p 00006000 fd:01 1234                       /opt/app/bin/app
            55d1c2a07000-55d1c2a28000 rw-p 00000000 00:00 0                          [heap]
            7f0000000000-7f0000100000 r--p 00000000 fd:01 99                         /usr/lib/locale/locale-archive
            7f1000000000-7f1000028000 r--p 00000000 fd:01 5678                       /usr/lib/x86_64-linux-gnu/libc.so.6
            7f1000028000-7f100019d000 r-xp 00028000 fd:01 5678                       /usr/lib/x86_64-linux-gnu/libc.so.6
            7f100019d000-7f10001f5000 r--p 0019d000 fd:01 5678                       /usr/lib/x86_64-linux-gnu/libc.so.6
            7f10001f5000-7f10001f9000 rw-p 001f5000 fd:01 5678                       /usr/lib/x86_64-linux-gnu/libc.so.6
            7f10001f9000-7f1000206000 rw-p 00000000 00:00 0
            7ffc00000000-7ffc00021000 rw-p 00000000 00:00 0                          [stack]
            7ffc00100000-7ffc00104000 r--p 00000000 00:00 0                          [vvar]
            7ffc00104000-7ffc00106000 r-xp 00000000 00:00 0                          [vdso]
            """
        let (images, truncated) = try parse(maps)
        #expect(!truncated)
        #expect(images.map(\.path) == ["/opt/app/bin/app", "/usr/lib/x86_64-linux-gnu/libc.so.6", "[vdso]"])
        #expect(images[0].start == 0x55d1_c2a0_0000 && images[0].end == 0x55d1_c2a0_7000)
        #expect(images[0].isMainExecutable && !images[1].isMainExecutable)
        #expect(images[1].end == 0x7f10_001f_9000)
        #expect(images[2].isVDSO && images[2].name == "[vdso]")
    }

    @Test("A 4 KiB path, \" (deleted)\", memfd, no final newline and garbage lines")
    func oddLines() throws {
        let longPath = "/opt/" + String(repeating: "d", count: 4090) + "/libdeep.so"
        let maps = """
            garbage line without addresses
            ffff-0000 r-xp 00000000 00:00 0 /backwards
            7f2000000000-7f2000001000 r-xp 00000000 fd:01 1 \(longPath)
            7f3000000000-7f3000001000 r-xp 00000000 fd:01 2 /opt/app/lib/libgone.so (deleted)
            7f4000000000-7f4000001000 r-xp 00000000 00:01 3 /memfd:jit (deleted)
            7f5000000000-7f5000001000 r-xp 00000000 fd:01 4 /opt/app/lib/with space.so
            """
        let (images, _) = try parse(maps)
        #expect(images.count == 4)
        #expect(images[0].isPathTruncated)
        #expect(images[0].path.hasSuffix("/libdeep.so"), "the end of a long path is kept: its name survives")
        #expect(images[0].name == "libdeep.so")
        #expect(images[1].path == "/opt/app/lib/libgone.so" && images[1].isDeleted)
        #expect(images[2].isAnonymous && images[2].name == "memfd:jit")
        #expect(images[3].path == "/opt/app/lib/with space.so")
    }

    @Test("More images than the capacity: the rest is reported as truncated")
    func capacity() throws {
        let lines = (0..<10).map { i in
            String(format: "7f%02x00000000-7f%02x00001000 r-xp 00000000 fd:01 %d /lib/l%d.so", i, i, i + 10, i)
        }
        let (images, truncated) = try parse(lines.joined(separator: "\n") + "\n", capacity: 4)
        #expect(images.count == 4)
        #expect(truncated)
    }

    @Test("At capacity, later images are reported as truncated, never swapped in")
    func capacityWithDataSegments() throws {
        let maps = """
            7f0000000000-7f0000001000 r--p 00000000 fd:01 1 /lib/a.so
            7f0000001000-7f0000002000 r-xp 00001000 fd:01 1 /lib/a.so
            7f0000002000-7f0000003000 r--p 00000000 fd:01 2 /lib/b.so
            7f0000003000-7f0000004000 r-xp 00001000 fd:01 2 /lib/b.so
            7f0000005000-7f0000006000 r--p 00000000 fd:01 3 /lib/c.so
            7f0000006000-7f0000008000 r-xp 00001000 fd:01 3 /lib/c.so
            """
        let (images, truncated) = try parse(maps, capacity: 2)
        #expect(images.map(\.path) == ["/lib/a.so", "/lib/b.so"])
        #expect(images[1].start == 0x7f00_0000_2000 && images[1].end == 0x7f00_0000_4000)
        #expect(truncated)
    }

    @Test("This process: build ids read from memory equal the ones in the files on disk")
    func liveBuildIDs() throws {
        let fd = open("/proc/self/maps", O_RDONLY)
        defer { close(fd) }
        var images = [aft_image](repeating: aft_image(), count: Int(AFT_MAX_IMAGES))
        var truncated: UInt32 = 0
        let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? ""
        let n = exe.withCString { aft_images_from_maps_fd(fd, &images, UInt32(images.count), 1, $0, &truncated) }
        let loaded = images.prefix(Int(n)).map(LoadedImage.init)
        let main = try #require(loaded.first { $0.isMainExecutable })
        let fromDisk = try ELFSymbolTable(path: main.path).buildID
        let mainID = try #require(fromDisk)
        #expect(main.buildID == Hex.encode(mainID))
        let libc = try #require(loaded.first { $0.name == "libc.so.6" })
        let libcID = try #require(try ELFSymbolTable(path: libc.path).buildID)
        #expect(libc.buildID == Hex.encode(libcID))
        // The kernel maps a vDSO (qemu-user gives none): when maps shows one, so do the images.
        let maps = (try? FileHandle(forReadingFrom: URL(fileURLWithPath: "/proc/self/maps")).readToEnd()) ?? nil
        #expect(loaded.contains { $0.isVDSO } == String(decoding: maps ?? Data(), as: UTF8.self).contains("[vdso]"))
    }
}
