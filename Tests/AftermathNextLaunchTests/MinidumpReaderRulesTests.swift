import AftermathNextLaunch
import Foundation
import Testing

/// What Breakpad's processor rejects a whole list for (one bad module fails the ModuleList, one
/// repeated thread id the ThreadList), kept out of the dump whatever the report holds.
extension MinidumpWriterTests {
    @Test(
        "Readers' rules: no empty, backwards or overlapping module or memory range, no repeated thread id, at most 4096 threads, 2048 modules and 1024-unit names"
    )
    func readerRules() throws {
        var r = Self.report(.x86_64)
        let main = r.images[1]
        var empty = r.images[0]
        empty.end = empty.start  // no extent
        var backwards = r.images[2]
        backwards.end = backwards.start - 0x1000
        var overlapping = r.images[0]
        overlapping.start = r.images[0].start + 0x1000  // inside libc
        overlapping.end = r.images[0].end + 0x1000
        overlapping.path = "/overlapping.so"
        var long = r.images[2]
        long.path = "/" + String(repeating: "x", count: 3000)
        r.images = [r.images[0], main, empty, backwards, overlapping, long]
        // Two records with the same 32-bit id (one of them the crashed thread), and more than
        // the readers take.
        var twin = r.threads[1]
        twin.id = r.threads[0].id | (1 << 32)
        var many = (0..<5000).map { i -> CrashThread in
            var t = r.threads[2]
            t.id = UInt64(10_000 + i)
            return t
        }
        var sameStack = r.threads[1]  // another thread over the same stack bytes
        sameStack.id = 555
        many.insert(contentsOf: [twin, r.threads[1], sameStack], at: 0)
        many.append(r.threads[0])  // the crashed thread last
        r.threads = many

        let d = try Dump(MinidumpWriter.write(r))
        try Self.checkBounds(d)
        let list = try #require(d.stream(.threadList)).rva
        let count = Int(d.u32(list))
        #expect(count == 4096)
        let ids = (0..<count).map { d.u32(list + 4 + 48 * $0) }
        #expect(Set(ids).count == ids.count)
        #expect(ids.contains(101))  // the crashed thread kept, its twin left out
        let exception = try #require(d.stream(.exception)).rva
        #expect(d.u32(exception) == 101)
        let crashedAt = try #require(ids.firstIndex(of: 101))
        #expect(d.u32(exception + 160) == d.u32(list + 4 + 48 * crashedAt + 40))
        #expect(d.u32(exception + 164) == d.u32(list + 4 + 48 * crashedAt + 44))

        let memory = try #require(d.stream(.memoryList)).rva
        let ranges = (0..<Int(d.u32(memory))).map { i -> (UInt64, UInt64) in
            let m = memory + 4 + 16 * i
            return (d.u64(m), d.u64(m) + UInt64(d.u32(m + 8)))
        }
        #expect(ranges.count == 2)  // the crashed thread's, and the one stack of 102 and 555
        for (i, a) in ranges.enumerated() { for b in ranges[(i + 1)...] { #expect(a.1 <= b.0 || b.1 <= a.0) } }

        let modules = try #require(d.stream(.moduleList)).rva
        let kept = (0..<Int(d.u32(modules))).map { i -> (base: UInt64, size: UInt32, name: String) in
            let m = modules + 4 + 108 * i
            return (d.u64(m), d.u32(m + 8), (try? d.string(Int(d.u32(m + 20)))) ?? "?")
        }
        #expect(kept.map(\.name).first == main.path)
        #expect(kept.count == 3)  // main, libc and the long one: the other three are left out
        for (i, a) in kept.enumerated() {
            #expect(a.size > 0 && a.base.addingReportingOverflow(UInt64(a.size)).overflow == false)
            for b in kept[(i + 1)...] {
                #expect(a.base + UInt64(a.size) <= b.base || b.base + UInt64(b.size) <= a.base)
            }
            #expect(a.name.utf16.count <= 1024)
        }
    }

    @Test("The crashing thread built from the report's registers has no twin among the listed threads")
    func builtCrashingThreadHasNoTwin() throws {
        var r = Self.report(.x86_64)
        r.threads = r.threads.filter { !$0.crashed }
        r.threads[0].id = r.threadID | (1 << 32)  // the same 32-bit id, not the crashed thread
        let d = try Dump(MinidumpWriter.write(r))
        let list = try #require(d.stream(.threadList)).rva
        let ids = (0..<Int(d.u32(list))).map { d.u32(list + 4 + 48 * $0) }
        #expect(ids.first == UInt32(r.threadID) && Set(ids).count == ids.count)
    }

    @Test("The limits' defaults are within what Breakpad's processor takes")
    func defaultLimitsWithinReaders() {
        let limits = MinidumpWriter.Limits()
        #expect(limits.threads <= 4096 && limits.modules <= 2048 && limits.pathUnits <= 1024)
    }
}
