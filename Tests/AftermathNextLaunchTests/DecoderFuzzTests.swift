import AftermathNextLaunch
import AftermathOTLP
import CSignalShim
import AftermathSymbolication
import AftermathTesting
import TestSupport
import Foundation
import Testing

/// Mutation fuzzing of every decoder, from the golden files the real writers made. Each
/// mutant is resealed (CRC and body size recomputed) so it gets past the checksum into the
/// section parsers and the record mappers. A trap anywhere fails the run; a thrown
/// ReportFileError is the expected outcome for most mutants. Deterministic (seeded).
@Suite("Decoder fuzzing")
struct DecoderFuzzTests {
    /// SplitMix64: a small deterministic generator.
    struct Generator: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    static func mutate(_ input: [UInt8], _ g: inout Generator) -> [UInt8] {
        var b = input
        for _ in 0..<Int.random(in: 1...4, using: &g) {
            guard !b.isEmpty else { break }
            let at = Int.random(in: 0..<b.count, using: &g)
            switch Int.random(in: 0..<6, using: &g) {
            case 0: b[at] ^= UInt8(1 << Int.random(in: 0..<8, using: &g))
            case 1: b[at] = UInt8.random(in: 0...255, using: &g)
            case 2:  // a 32-bit field set to an extreme (counts, sizes, offsets)
                let v: UInt32 = [0, 1, 0x7FFF_FFFF, 0xFFFF_FFFF, 0x8000_0000, UInt32(b.count)].randomElement(using: &g)!
                let start = at & ~3
                if start + 4 <= b.count {
                    withUnsafeBytes(of: v.littleEndian) { b.replaceSubrange(start..<start + 4, with: $0) }
                }
            case 3: b.removeLast(Int.random(in: 0...min(b.count, 400), using: &g))
            case 4:
                b.insert(
                    contentsOf: (0..<Int.random(in: 1...64, using: &g)).map { _ in UInt8.random(in: 0...255, using: &g)
                    }, at: at)
            default:  // duplicate a slice elsewhere (sections twice, overlapping)
                let len = Int.random(in: 1...min(512, b.count - at), using: &g)
                b.insert(contentsOf: b[at..<at + len], at: Int.random(in: 0...b.count, using: &g))
            }
        }
        // Keep the header's own bytes valid half the time, so the body parsers are reached.
        if b.count >= 64, Bool.random(using: &g) { b = TestSupport.resealed(b) }
        return b
    }

    @Test(
        "Crash and hang files: decode, salvage and map never trap",
        arguments: [
            "v1/sigsegv-null-depth12.crash", "v1/hang-unfinished-killed.hang", "v2/sigsegv-null-depth12.crash",
            "v3/sigsegv-null-depth12.crash",
        ])
    func reportFiles(_ fixture: String) throws {
        let golden = try TestSupport.fixture(fixture)
        var g = Generator(state: 0xA57E_2026)
        var decoded = 0
        let symbolicator = Symbolicator()  // one cache: the ELF files are read once
        for _ in 0..<3000 {
            let mutant = Self.mutate(golden, &g)
            for salvage in [false, true] {
                guard let file = try? ReportFile.decode(mutant, salvage: salvage) else { continue }
                decoded += 1
                if let crash = try? file.crashReport() {
                    _ = RecordMapper.crash(crash, observedTimeUnixNano: 1)
                    _ = crash.symbolicatedFrames(using: symbolicator)
                }
                if let hang = try? HangReport(file: file) {
                    _ = HangRecordMapper.hang(hang, observedTimeUnixNano: 1)
                }
            }
        }
        #expect(decoded > 100, "mutants must reach the section parsers, \(decoded) did")
    }

    @Test("Run files: decode and judge never trap")
    func runFiles() throws {
        let golden = try TestSupport.fixture("v1/run-killed-during-hang.run")
        var g = Generator(state: 0x5EED)
        let judge = ExitInference(
            environment: ExitEnvironment(osName: "Debian GNU/Linux", osVersion: "12", kernelRelease: "6.1"))
        var decoded = 0
        for _ in 0..<3000 {
            guard let run = try? RunFile.decode(Self.mutate(golden, &g)) else { continue }
            decoded += 1
            _ = judge.judge(run, crashed: false, unfinishedHangMilliseconds: 1000)
        }
        #expect(decoded > 100, "mutants must reach the run parser, \(decoded) did")
    }

    @Test("Handled-error files: decode and map never trap")
    func errorFiles() throws {
        let golden = try TestSupport.fixture("v1/handled-error.error")
        var g = Generator(state: 0xE770)
        var decoded = 0
        for _ in 0..<3000 {
            guard let error = try? HandledErrorFile.decode(Self.mutate(golden, &g)) else { continue }
            decoded += 1
            _ = error.record(observedTimeUnixNano: 1)
        }
        #expect(decoded > 100, "mutants must reach the error parser, \(decoded) did")
    }

    @Test("OTLP/JSON decode of mutated exporter output never traps")
    func otlpJSON() throws {
        let crash = try ReportFile.decode(TestSupport.fixture("v1/sigsegv-null-depth12.crash")).crashReport()
        let golden = OTLPJSON.encode(
            LogBatch(
                resource: Resource(), scopeName: "s", scopeVersion: "1",
                records: [RecordMapper.crash(crash, observedTimeUnixNano: 1)]))
        var g = Generator(state: 0x0717)
        for _ in 0..<3000 { _ = try? OTLPJSON.decode(Self.mutate(golden, &g)) }
    }
}
