import Testing
import AftermathNextLaunch
import AftermathOTLP
import CSignalShim
import TestSupport

@Suite struct ULIDTests {
    @Test func knownVector() {
        #expect(ULID.make(timeMilliseconds: 1_469_918_176_385, entropy: []) == "01ARYZ6S410000000000000000")
        #expect(
            ULID.make(timeMilliseconds: 1_469_918_176_385, entropy: [UInt8](repeating: 0, count: 10))
                == "01ARYZ6S410000000000000000")
        #expect(
            ULID.make(timeMilliseconds: 0, entropy: [UInt8](repeating: 0xFF, count: 16)) == "0000000000ZZZZZZZZZZZZZZZZ"
        )
        #expect(ULID.make(timeMilliseconds: (1 << 48) - 1, entropy: [0x80]) == "7ZZZZZZZZZG000000000000000")
    }

    @Test func deterministicAndUsesOnlyTenBytes() {
        let entropy: [UInt8] = [0x12, 0x34, 0x56, 0x78, 0x9A, 0xBC, 0xDE, 0xF0, 0x11, 0x22]
        let a = ULID.make(timeMilliseconds: 1_750_000_000_000, entropy: entropy)
        #expect(a == ULID.make(timeMilliseconds: 1_750_000_000_000, entropy: entropy))
        #expect(a == ULID.make(timeMilliseconds: 1_750_000_000_000, entropy: entropy + [0xFF, 0xFF]))
        #expect(
            a
                != ULID.make(
                    timeMilliseconds: 1_750_000_000_000, entropy: [0x12] + entropy.dropFirst().dropLast() + [0x23]))
        #expect(a.count == 26 && ULID.isValid(a))
    }

    @Test(arguments: [0, 1, 1_469_918_176_385, 1_750_000_000_123, (1 << 48) - 1] as [UInt64])
    func timePartDecodesBack(_ time: UInt64) {
        let ulid = ULID.make(timeMilliseconds: time, entropy: [9, 8, 7])
        #expect(ULID.timeMilliseconds(of: ulid) == time)
        #expect(ULID.timeMilliseconds(of: ulid.lowercased()) == time)
    }

    @Test func sortsByTime() {
        let times: [UInt64] = [1_750_000_000_001, 5, 1_469_918_176_385, 1_750_000_000_000, 31, 32]
        let ulids = times.map { ULID.make(timeMilliseconds: $0, entropy: [0xFF]) }
        #expect(ulids.sorted() == times.sorted().map { ULID.make(timeMilliseconds: $0, entropy: [0xFF]) })
    }

    @Test(arguments: [
        "", "01ARYZ6S41000000000000000", "01ARYZ6S4100000000000000000", "81ARYZ6S410000000000000000",
        "01ARYZ6S41000000000000000U", "01ARYZ6S41000000000000000I", "01ARYZ6S41-00000000000000",
    ])
    func rejectsInvalid(_ s: String) {
        #expect(!ULID.isValid(s))
        #expect(ULID.timeMilliseconds(of: s) == nil)
    }
}
