import CSignalShim
import Foundation
import Testing

/// The body CRC of every report: CRC-32 (IEEE 802.3) whether the processor's carry-less
/// multiply computes it or the tables do, at every length and alignment.
@Suite("CRC-32 of report bodies")
struct CRC32Tests {
    @Test("The check value of CRC-32/ISO-HDLC, by both paths")
    func checkValue() {
        let text = Array("123456789".utf8)
        #expect(aft_crc32(0, text, text.count) == 0xCBF4_3926)
        #expect(aft_crc32_by_table(0, text, text.count) == 0xCBF4_3926)
        // 64 bytes and more take the folding path where there is one.
        let long = [UInt8](repeating: 0x61, count: 1000)
        #expect(aft_crc32(0, long, long.count) == aft_crc32_by_table(0, long, long.count))
    }

    @Test("Every length to 300 and long buffers at every alignment equal the tables'; chained calls too")
    func matchesTables() {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<70_000).map { _ in UInt8.random(in: 0...255, using: &generator) }
        bytes.withUnsafeBufferPointer { buffer in
            let base = buffer.baseAddress!
            var mismatches = 0
            for length in 0...300 {
                let seed = UInt32.random(in: 0...UInt32.max, using: &generator)
                if aft_crc32(seed, base + 3, length) != aft_crc32_by_table(seed, base + 3, length) { mismatches += 1 }
            }
            for offset in 0..<16 {
                let length = Int.random(in: 1_000...60_000, using: &generator)
                if aft_crc32(0, base + offset, length) != aft_crc32_by_table(0, base + offset, length) {
                    mismatches += 1
                }
                // A body written in pieces: the running CRC carries across calls.
                let split = Int.random(in: 0...length, using: &generator)
                let chained = aft_crc32(aft_crc32(0, base + offset, split), base + offset + split, length - split)
                if chained != aft_crc32_by_table(0, base + offset, length) { mismatches += 1 }
            }
            #expect(mismatches == 0)
        }
    }

    @Test("On an x86-64 processor with PCLMULQDQ the fast path is the one in use")
    func acceleratedWhereAvailable() throws {
        #if arch(x86_64)
        let cpuinfo = try String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)
        let flags = cpuinfo.split(separator: "\n").first { $0.hasPrefix("flags") } ?? ""
        let has = flags.split(separator: " ").contains("pclmulqdq")
        #expect((aft_crc32_accelerated() == 1) == has)
        #else
        #expect(aft_crc32_accelerated() == 0)
        #endif
    }
}
