import Foundation
import Testing

import AftermathSymbolication
import AftermathNextLaunch
import TestSupport

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// MARK: - Functions to find in the test executable's own symbol table

/// Returns the return addresses captured by glibc's `backtrace()`; element 0 is inside this function.
@inline(never)
func aftermathELFTestSwiftMarker() -> [UInt] {
    typealias Backtrace = @convention(c) (UnsafeMutablePointer<UnsafeMutableRawPointer?>?, Int32) -> Int32
    guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "backtrace") else { return [] }
    let backtrace = unsafeBitCast(symbol, to: Backtrace.self)
    let buffer = UnsafeMutablePointer<UnsafeMutableRawPointer?>.allocate(capacity: 8)
    defer { buffer.deallocate() }
    let count = backtrace(buffer, 8)
    return (0..<Int(max(count, 0))).map { UInt(bitPattern: buffer[$0]) }
}

@_cdecl("aftermath_elf_test_cdecl_marker")
@inline(never)
func aftermathELFTestCdeclMarker(_ value: Int32) -> Int32 {
    value &* 3 &+ 1
}

// MARK: - Helpers

/// One line of /proc/self/maps.
private struct ELFTestMapping {
    var start: UInt64, end: UInt64, offset: UInt64, path: String
}

private func elfTestReadMaps() throws -> [ELFTestMapping] {
    // A read(2) loop to the end: /proc files return short reads, which a whole-file reader may
    // take for the end when the process has many mappings.
    let fd = open("/proc/self/maps", O_RDONLY)
    guard fd >= 0 else { throw CocoaError(.fileReadNoSuchFile) }
    defer { close(fd) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = read(fd, &chunk, chunk.count)
        if n <= 0 { break }
        bytes += chunk[0..<n]
    }
    let text = String(decoding: bytes, as: UTF8.self)
    return text.split(separator: "\n").compactMap { line in
        let fields = line.split(separator: " ", maxSplits: 5, omittingEmptySubsequences: true)
        guard fields.count == 6 else { return nil }
        let range = fields[0].split(separator: "-")
        guard range.count == 2, let start = UInt64(range[0], radix: 16), let end = UInt64(range[1], radix: 16),
            let offset = UInt64(fields[2], radix: 16)
        else { return nil }
        return ELFTestMapping(
            start: start, end: end, offset: offset,
            path: String(fields[5]).trimmingCharacters(in: .whitespaces))
    }
}

/// The image path containing `address` and its load address (start of its offset-0 mapping).
private func elfTestImage(containing address: UInt64) throws -> (path: String, loadAddress: UInt64) {
    let maps = try elfTestReadMaps()
    let hit = try #require(maps.first { $0.start <= address && address < $0.end && $0.path.hasPrefix("/") })
    let base = try #require(maps.first { $0.path == hit.path && $0.offset == 0 })
    return (hit.path, base.start)
}

private func elfTestTemporaryDirectory() throws -> URL {
    let url = FileManager.default.temporaryDirectory
        .appendingPathComponent("aftermath-elf-\(getpid())-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}

private func elfTestWrite(_ bytes: [UInt8], to directory: URL, name: String) throws -> String {
    let url = directory.appendingPathComponent(name)
    try Data(bytes).write(to: url)
    return url.path
}

private func elfTestLE64(_ bytes: [UInt8], _ offset: Int) -> UInt64 {
    (0..<8).reduce(UInt64(0)) { $0 | UInt64(bytes[offset + $1]) << (8 * UInt64($1)) }
}

private func elfTestLE16(_ bytes: [UInt8], _ offset: Int) -> Int {
    Int(bytes[offset]) | Int(bytes[offset + 1]) << 8
}

private func elfTestPut64(_ bytes: inout [UInt8], _ offset: Int, _ value: UInt64) {
    for i in 0..<8 { bytes[offset + i] = UInt8(truncatingIfNeeded: value >> (8 * UInt64(i))) }
}

/// Deterministic xorshift generator so fuzz failures are reproducible.
private struct ELFTestRandom: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        return state
    }
}

/// Loads `path`; a successful load must also survive lookups. Returns nil if it threw.
@discardableResult
private func elfTestLoadSurvivingLookups(_ path: String, rng: inout ELFTestRandom) -> ELFSymbolTable? {
    guard let table = try? ELFSymbolTable(path: path) else { return nil }
    for _ in 0..<16 { _ = table.lookup(virtualAddress: rng.next() & 0xffff) }
    _ = table.lookup(virtualAddress: 0)
    _ = table.lookup(virtualAddress: .max)
    return table
}

private let elfTestSample = "/bin/true"

// MARK: - Tests

@Suite("ELF symbol tables and symbolication")
struct ELFSymbolTableTests {
    @Test("An @inline(never) Swift function in the test executable symbolicates from .symtab")
    func liveSwiftFunction() throws {
        let frames = aftermathELFTestSwiftMarker()
        let returnAddress = UInt64(try #require(frames.first))
        let (path, loadAddress) = try elfTestImage(containing: returnAddress)
        let frame = try #require(
            Symbolicator().symbolicate(
                address: returnAddress, imagePath: path, loadAddress: loadAddress, isReturnAddress: true))
        #expect(frame.function.hasPrefix("$s"))
        #expect(frame.demangled.contains("aftermathELFTestSwiftMarker"))
        #expect(frame.offset > 0)
        // The caller (this test function) is frame 1.
        if frames.count > 1 {
            let caller = Symbolicator().symbolicate(
                address: UInt64(frames[1]), imagePath: path, loadAddress: loadAddress, isReturnAddress: true)
            #expect(caller?.demangled.contains("liveSwiftFunction") == true)
        }
    }

    @Test("A @_cdecl function symbolicates to its C name at offset 0")
    func liveCdeclFunction() throws {
        #expect(aftermathELFTestCdeclMarker(2) == 7)
        let function: @convention(c) (Int32) -> Int32 = aftermathELFTestCdeclMarker
        let address = UInt64(UInt(bitPattern: unsafeBitCast(function, to: UnsafeRawPointer.self)))
        let (path, loadAddress) = try elfTestImage(containing: address)
        let frame = try #require(
            Symbolicator().symbolicate(
                address: address, imagePath: path, loadAddress: loadAddress, isReturnAddress: false))
        #expect(frame.function == "aftermath_elf_test_cdecl_marker")
        #expect(frame.demangled == "aftermath_elf_test_cdecl_marker")
        #expect(frame.offset == 0)
        // A return address at the start of a function belongs to the previous one.
        let previous = Symbolicator().symbolicate(
            address: address, imagePath: path, loadAddress: loadAddress, isReturnAddress: true)
        #expect(previous?.function != "aftermath_elf_test_cdecl_marker")
    }

    @Test("libc's getpid symbolicates via .dynsym")
    func libcFunction() throws {
        let symbol = try #require(dlsym(UnsafeMutableRawPointer(bitPattern: 0), "getpid"))
        let address = UInt64(UInt(bitPattern: symbol))
        let (path, loadAddress) = try elfTestImage(containing: address)
        #expect(path.contains("libc"))
        let frame = try #require(
            Symbolicator().symbolicate(
                address: address, imagePath: path, loadAddress: loadAddress, isReturnAddress: false))
        #expect(frame.function.contains("getpid"))
        #expect(frame.offset == 0)
        let inside = Symbolicator().symbolicate(
            address: address + 2, imagePath: path, loadAddress: loadAddress, isReturnAddress: true)
        #expect(inside?.function.contains("getpid") == true)
        #expect(inside?.offset == 2)
    }

    @Test("Build ID of the test executable matches readelf -n")
    func buildIDOfTestExecutable() throws {
        let path = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        let table = try ELFSymbolTable(path: path)
        let buildID = try #require(table.buildID)
        #expect(buildID.count == 20)
        #expect(table.usesFullSymbolTable)
        #expect(table.symbolCount > 100)

        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/readelf") else { return }
        BrokenPipe.ignoreSIGPIPE()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/readelf")
        process.arguments = ["-n", path]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        let line = try #require(output.split(separator: "\n").first { $0.contains("Build ID:") })
        let expected = line.split(separator: ":").last!.trimmingCharacters(in: .whitespaces)
        #expect(buildID.map { String(format: "%02x", $0) }.joined() == expected)
    }

    @Test("Stripped /bin/true falls back to .dynsym and has a build ID")
    func strippedBinary() throws {
        let table = try ELFSymbolTable(path: elfTestSample)
        #expect(!table.usesFullSymbolTable)
        #expect(table.buildID?.count == 20)
    }

    @Test("Missing files, directories, devices and FIFOs throw")
    func nonFiles() throws {
        #expect(throws: ELFError.self) { try ELFSymbolTable(path: "/nonexistent/aftermath") }
        #expect(throws: ELFError.self) { try ELFSymbolTable(path: "/") }
        #expect(throws: ELFError.self) { try ELFSymbolTable(path: "/dev/null") }
        let directory = try elfTestTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let fifo = directory.appendingPathComponent("fifo").path
        #expect(mkfifo(fifo, 0o600) == 0)
        // Must not block in open().
        #expect(throws: ELFError.notRegularFile(path: fifo)) { try ELFSymbolTable(path: fifo) }
    }

    @Test("Empty, random and truncated files throw instead of crashing")
    func hostileFiles() throws {
        let directory = try elfTestTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        var rng = ELFTestRandom(state: 0x9e37_79b9_7f4a_7c15)

        let empty = try elfTestWrite([], to: directory, name: "empty")
        #expect(throws: ELFError.notELF) { try ELFSymbolTable(path: empty) }

        let random = try elfTestWrite(
            (0..<4096).map { _ in UInt8.random(in: 0...255, using: &rng) },
            to: directory, name: "random")
        #expect(throws: ELFError.notELF) { try ELFSymbolTable(path: random) }

        let magicThenRandom = try elfTestWrite(
            [0x7f, 0x45, 0x4c, 0x46, 2, 1] + (0..<4090).map { _ in UInt8.random(in: 0...255, using: &rng) },
            to: directory, name: "magic-random")
        elfTestLoadSurvivingLookups(magicThenRandom, rng: &rng)

        let original = Array(try Data(contentsOf: URL(fileURLWithPath: elfTestSample)))
        // Truncated within the headers.
        for length in stride(from: 0, to: 200, by: 7) {
            let path = try elfTestWrite(Array(original.prefix(length)), to: directory, name: "head-\(length)")
            #expect(throws: ELFError.self, "truncated at \(length)") { try ELFSymbolTable(path: path) }
        }
        // Truncated inside the section header table (at its end), one entry at a time.
        let shoff = Int(elfTestLE64(original, 40))
        let shnum = elfTestLE16(original, 60)
        #expect(shoff + shnum * 64 == original.count)
        for entry in 0..<shnum {
            for cut in [0, 1, 63] {
                let length = shoff + entry * 64 + cut
                let path = try elfTestWrite(Array(original.prefix(length)), to: directory, name: "sh-\(length)")
                #expect(throws: ELFError.self, "truncated at \(length)") { try ELFSymbolTable(path: path) }
            }
        }
        // Every other truncation throws too (the section table is at the end of the file).
        for length in stride(from: 200, to: original.count, by: 997) {
            let path = try elfTestWrite(Array(original.prefix(length)), to: directory, name: "body-\(length)")
            #expect(throws: ELFError.self, "truncated at \(length)") { try ELFSymbolTable(path: path) }
        }
    }

    @Test("Header and section offsets pointing past the end throw")
    func hostileOffsets() throws {
        let directory = try elfTestTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let original = Array(try Data(contentsOf: URL(fileURLWithPath: elfTestSample)))
        let shoff = Int(elfTestLE64(original, 40))
        let shnum = elfTestLE16(original, 60)

        var cases: [(String, [UInt8])] = []
        for value: UInt64 in [UInt64(original.count), UInt64(original.count - 1), 1 << 40, .max - 10] {
            var bytes = original
            elfTestPut64(&bytes, 40, value)  // e_shoff
            cases.append(("e_shoff=\(value)", bytes))
            bytes = original
            elfTestPut64(&bytes, 32, value)  // e_phoff
            cases.append(("e_phoff=\(value)", bytes))
        }
        var manySections = original
        manySections[60] = 0xff
        manySections[61] = 0xff  // e_shnum = 65535
        cases.append(("e_shnum=65535", manySections))
        // Every section's sh_offset / sh_size pushed past the end, and sh_link out of range.
        var offsets = original, sizes = original, links = original, entsizes = original
        for i in 1..<shnum {
            let header = shoff + i * 64
            elfTestPut64(&offsets, header + 24, UInt64(original.count) + 8)
            elfTestPut64(&sizes, header + 32, .max)
            links[header + 40] = 0xee
            links[header + 41] = 0xee
            elfTestPut64(&entsizes, header + 56, .max)
        }
        cases += [("sh_offset", offsets), ("sh_size", sizes), ("sh_link", links), ("sh_entsize", entsizes)]

        for (name, bytes) in cases {
            let path = try elfTestWrite(bytes, to: directory, name: name)
            #expect(throws: ELFError.self, "\(name)") { try ELFSymbolTable(path: path) }
        }

        // Defined function symbols at the top of the address space, sized and unsized: loads, no traps.
        let dynsym = try #require((1..<shnum).map { shoff + $0 * 64 }.first { original[$0 + 4] == 11 })
        let symbols = Int(elfTestLE64(original, dynsym + 24)), count = Int(elfTestLE64(original, dynsym + 32)) / 24
        for size: UInt64 in [0, 16, .max] {
            var bytes = original
            for i in 1..<count {
                let entry = symbols + i * 24
                bytes[entry + 4] = 0x12  // STB_GLOBAL, STT_FUNC
                bytes[entry + 6] = 15
                bytes[entry + 7] = 0  // some defined section
                elfTestPut64(&bytes, entry + 8, .max - UInt64(i % 3))
                elfTestPut64(&bytes, entry + 16, size)
            }
            let path = try elfTestWrite(bytes, to: directory, name: "high-symbols-\(size)")
            let table = try ELFSymbolTable(path: path)
            #expect(table.symbolCount > 0)
            _ = table.lookup(virtualAddress: .max)
            _ = table.lookup(virtualAddress: .max - 1)
            #expect(table.lookup(virtualAddress: 0x1000) == nil)
        }
    }

    @Test("Randomly corrupted headers never crash")
    func fuzzedHeaders() throws {
        let directory = try elfTestTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let original = Array(try Data(contentsOf: URL(fileURLWithPath: elfTestSample)))
        let shoff = Int(elfTestLE64(original, 40))
        var rng = ELFTestRandom(state: 0xdead_beef_cafe_f00d)
        let path = directory.appendingPathComponent("fuzz").path
        var loaded = 0
        for _ in 0..<1500 {
            var bytes = original
            for _ in 0..<Int.random(in: 1...6, using: &rng) {
                // Corrupt the ELF header, program headers, .dynsym/.dynstr/notes or section headers.
                let region = Int.random(in: 0..<3, using: &rng)
                let index =
                    region == 0
                    ? Int.random(in: 0..<64, using: &rng)
                    : region == 1
                        ? Int.random(in: 64..<0xb76, using: &rng)
                        : Int.random(in: shoff..<original.count, using: &rng)
                bytes[index] = UInt8.random(in: 0...255, using: &rng)
            }
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            if elfTestLoadSurvivingLookups(path, rng: &rng) != nil { loaded += 1 }
        }
        #expect(loaded > 0)  // most corruptions are harmless to the parts we read
    }

    @Test("Symbolicator strips ' (deleted)' and refuses mismatching build IDs")
    func symbolicatorChecks() throws {
        let symbol = try #require(dlsym(UnsafeMutableRawPointer(bitPattern: 0), "getpid"))
        let address = UInt64(UInt(bitPattern: symbol))
        let (path, loadAddress) = try elfTestImage(containing: address)
        let symbolicator = Symbolicator()
        let buildID = try #require(symbolicator.table(for: path)?.buildID)

        let deleted = symbolicator.symbolicate(
            address: address, imagePath: path + " (deleted)",
            loadAddress: loadAddress, isReturnAddress: false)
        #expect(deleted?.function.contains("getpid") == true)
        let matching = symbolicator.symbolicate(
            address: address, imagePath: path, loadAddress: loadAddress,
            isReturnAddress: false, expectedBuildID: buildID)
        #expect(matching?.function.contains("getpid") == true)
        var wrong = buildID
        wrong[0] ^= 0xff
        #expect(
            symbolicator.symbolicate(
                address: address, imagePath: path, loadAddress: loadAddress,
                isReturnAddress: false, expectedBuildID: wrong) == nil)
        #expect(
            symbolicator.symbolicate(
                address: loadAddress - 1, imagePath: path, loadAddress: loadAddress,
                isReturnAddress: false) == nil)
        #expect(
            symbolicator.symbolicate(
                address: address, imagePath: "/nonexistent/lib.so",
                loadAddress: loadAddress, isReturnAddress: false) == nil)
        #expect(symbolicator.table(for: "/nonexistent/lib.so") == nil)
    }

    @Test("Concurrent symbolication from many tasks agrees")
    func concurrentUse() async throws {
        let frames = aftermathELFTestSwiftMarker()
        let address = UInt64(try #require(frames.first))
        let (path, loadAddress) = try elfTestImage(containing: address)
        let symbolicator = Symbolicator()
        let results = await withTaskGroup(of: SymbolicatedFrame?.self) { group in
            for _ in 0..<32 {
                group.addTask {
                    symbolicator.symbolicate(
                        address: address, imagePath: path, loadAddress: loadAddress,
                        isReturnAddress: true)
                }
            }
            return await group.reduce(into: Set<SymbolicatedFrame?>()) { $0.insert($1) }
        }
        #expect(results.count == 1)
        #expect(results.first??.demangled.contains("aftermathELFTestSwiftMarker") == true)
    }
}
