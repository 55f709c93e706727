import AftermathNextLaunch
import CSignalShim
import Foundation
import Testing
import TestSupport

/// Absurd counts, sizes and values in a report: the writer stays within its limits and every
/// offset it writes stays inside the file.
extension MinidumpWriterTests {
    /// Every stream, context, stack, string and CodeView record the dump points at is inside it.
    static func checkBounds(_ d: Dump) throws {
        let n = d.bytes.count
        func inside(_ rva: UInt32, _ size: UInt32, _ what: String) {
            #expect(Int(rva) + Int(size) <= n, "\(what) past the end")
        }
        let list = try #require(d.stream(.threadList)).rva
        for i in 0..<Int(d.u32(list)) {
            let t = list + 4 + 48 * i
            inside(d.u32(t + 36), d.u32(t + 32), "stack \(i)")
            inside(d.u32(t + 44), d.u32(t + 40), "context \(i)")
            #expect(d.u64(t + 24).addingReportingOverflow(UInt64(d.u32(t + 32))).overflow == false)
        }
        let memory = try #require(d.stream(.memoryList)).rva
        for i in 0..<Int(d.u32(memory)) {
            inside(d.u32(memory + 4 + 16 * i + 12), d.u32(memory + 4 + 16 * i + 8), "memory")
        }
        let modules = try #require(d.stream(.moduleList)).rva
        for i in 0..<Int(d.u32(modules)) {
            let m = modules + 4 + 108 * i
            _ = try d.string(Int(d.u32(m + 20)))
            inside(d.u32(m + 80), d.u32(m + 76), "CodeView \(i)")
        }
        let names = try #require(d.stream(.threadNameList)).rva
        for i in 0..<Int(d.u32(names)) { _ = try d.string(Int(d.u64(names + 4 + 12 * i + 4))) }
    }

    @Test("Absurd values: registers, FP state, stacks, ids, names, images")
    func absurd() throws {
        var r = Self.report(.x86_64)
        var t = r.threads[0]
        t.id = UInt64.max
        t.crashed = false
        t.name = String(repeating: "😀", count: 300) + "x"
        t.registers = [1]
        t.fpState = [1, 2, 3]
        t.stackStart = UInt64.max - 10
        t.stack = [UInt8](repeating: 7, count: 100)
        var u = r.threads[1]
        u.registers = [UInt64](repeating: 9, count: 400)
        u.contextSource = .signal
        u.fpState = [UInt8](repeating: 1, count: 5000)
        u.stack = [UInt8](repeating: 3, count: 3 << 20)
        r.threads = [t, u, r.threads[2]]
        r.images[0].end = r.images[0].start - 1
        r.images[1].end = r.images[1].start + (1 << 40)
        r.images[1].buildID = "abc"
        r.images[2].path = String(repeating: "/very/long", count: 2000)
        r.images[2].isBuildIDTextHash = false
        r.images[2].buildID = String(repeating: "ab", count: 1000)
        r.signal = -1
        r.code = Int32.min
        r.threadID = 0
        let d = try Dump(MinidumpWriter.write(r))
        try Self.checkBounds(d)
        let list = try #require(d.stream(.threadList)).rva
        // The stack whose end is no address is dropped; the long one is cut at the cap.
        // (Record 0 is the crashing thread the writer adds: see below.)
        #expect(d.u32(list + 4 + 48 + 32) == 0)
        #expect(d.u32(list + 4 + 96 + 32) == UInt32(MinidumpWriter.Limits().stackBytesPerThread))
        #expect(d.u32(try #require(d.stream(.memoryList)).rva) == 1)
        // A cut name keeps whole characters.
        let names = try #require(d.stream(.threadNameList)).rva
        #expect(try d.string(Int(d.u64(names + 8))).unicodeScalars.allSatisfy { $0 == "😀" })
        let modules = try #require(d.stream(.moduleList)).rva
        // The image that ends before it starts is left out (a module of no size fails
        // Breakpad's whole list); the one past 4 GiB keeps the largest size there is.
        #expect(d.u32(modules) == 2)
        let sizes = (0..<2).map { d.u32(modules + 4 + 108 * $0 + 8) }
        #expect(sizes.contains(UInt32.max) && !sizes.contains(0))
        #expect((0..<2).map { d.u32(modules + 4 + 108 * $0 + 76) }.contains(4 + 255))
        // No thread matches the crash: the report's own is added first.
        #expect(d.u32(list) == 4 && d.u32(list + 4) == 0)
    }

    @Test("Counts past the limits: threads, modules and stack bytes are capped")
    func limits() throws {
        var r = Self.report(.x86_64)
        let base = r.threads[0]
        r.threads = (0..<300).map { i in
            var t = base
            t.id = UInt64(1000 + i)
            t.crashed = i == 0
            t.stack = [UInt8](repeating: UInt8(i & 0xFF), count: 8192)
            return t
        }
        r.threadID = 1000
        r.images = (0..<200).map { i in
            var image = r.images[1]
            image.start = UInt64(i) << 20
            image.end = image.start + 4096
            image.isMainExecutable = i == 199
            return image
        }
        var limits = MinidumpWriter.Limits()
        limits.threads = 100
        limits.modules = 50
        limits.stackBytes = 10 * 8192 + 100
        let d = try Dump(MinidumpWriter.write(r, limits: limits))
        try Self.checkBounds(d)
        let list = try #require(d.stream(.threadList)).rva
        #expect(d.u32(list) == 100)
        let stacks = (0..<100).map { d.u32(list + 4 + 48 * $0 + 32) }
        #expect(stacks.reduce(0, +) == UInt32(limits.stackBytes) && stacks.prefix(10).allSatisfy { $0 == 8192 })
        let modules = try #require(d.stream(.moduleList)).rva
        #expect(d.u32(modules) == 50 && d.u64(modules + 4) == 199 << 20)
    }

    @Test("Random reports never trap the writer and stay in bounds")
    func random() throws {
        var rng = DecoderFuzzTests.Generator(state: 0x5EED)
        for round in 0..<150 {
            var r = Self.report([.x86_64, .arm64, .unknown][round % 3], threads: round % 5 != 0)
            r.threads = (0..<Int(rng.next() % 12)).map { _ in
                var t = Self.report(.x86_64).threads[Int(rng.next() % 3)]
                t.id = rng.next()
                t.crashed = rng.next() % 4 == 0
                t.contextSource = [.signal, .crash, .syscall, .none][Int(rng.next() % 4)]
                t.registers = (0..<Int(rng.next() % 50)).map { _ in rng.next() }
                t.fpState = [UInt8](repeating: 0xAB, count: Int(rng.next() % 600))
                t.sp = rng.next() % 3 == 0 ? 0 : rng.next()
                t.pc = rng.next() % 3 == 0 ? 0 : rng.next()
                t.stackStart = rng.next()
                t.stack = [UInt8](repeating: 1, count: Int(rng.next() % 5000))
                t.name = String(
                    (0..<Int(rng.next() % 40)).map { _ in Character(UnicodeScalar(UInt8(rng.next() % 94 + 33))) })
                return t
            }
            for i in r.images.indices where rng.next() % 2 == 0 {
                r.images[i].start = rng.next()
                r.images[i].end = rng.next()
                r.images[i].buildID = String(repeating: "f", count: Int(rng.next() % 80))
            }
            r.threadID = rng.next()
            let d = try Dump(MinidumpWriter.write(r))
            try Self.checkBounds(d)
            #expect(d.u32(8) == 7)
        }
    }
}
