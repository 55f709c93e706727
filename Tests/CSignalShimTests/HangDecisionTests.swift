import CHarnessFaults
import Testing

/// The watchdog's decision (is the watched thread hung?): a pure function of what it knows.
@Suite("Hang decision")
struct HangDecisionTests {
    static let ms: UInt64 = 1_000_000

    /// The verdict for one set of facts, the defaults a hung, running, watched thread.
    static func decide(
        silentMs: UInt64 = 300, thresholdMs: UInt64 = 250, armed: Int32 = 1, paused: Int32 = 0,
        foreground: Int32 = 1, crashing: Int32 = 0, traced: Int32 = 0,
        state: Character = "R"
    ) -> UInt32 {
        aft_hang_decide(
            silentMs * ms, thresholdMs * ms, armed, paused, foreground, crashing, traced,
            CChar(bitPattern: state.asciiValue ?? 63))
    }

    @Test("Silent past the threshold, running, sleeping or in a disk wait: a hang")
    func hang() {
        for state: Character in ["R", "S", "D", "?"] {
            #expect(Self.decide(state: state) == AFT_TEST_HANG_HANG)
        }
    }

    @Test("At or under the threshold: alive")
    func threshold() {
        #expect(Self.decide(silentMs: 250) == AFT_TEST_HANG_ALIVE)
        #expect(Self.decide(silentMs: 10) == AFT_TEST_HANG_ALIVE)
        #expect(Self.decide(silentMs: 251) == AFT_TEST_HANG_HANG)
        #expect(Self.decide(silentMs: 2000, thresholdMs: 2000) == AFT_TEST_HANG_ALIVE)
    }

    @Test("Not armed, paused or in the background: detection is off, however long the silence")
    func off() {
        #expect(Self.decide(silentMs: 60_000, armed: 0) == AFT_TEST_HANG_OFF)
        #expect(Self.decide(silentMs: 60_000, paused: 1) == AFT_TEST_HANG_OFF)
        #expect(Self.decide(silentMs: 60_000, paused: 3) == AFT_TEST_HANG_OFF)
        #expect(Self.decide(silentMs: 60_000, foreground: 0) == AFT_TEST_HANG_OFF)
        #expect(Self.decide(silentMs: 60_000, paused: -1) == AFT_TEST_HANG_HANG)
    }

    @Test("A crash in progress, a tracer, a stopped or traced thread: ignored")
    func ignored() {
        #expect(Self.decide(crashing: 1) == AFT_TEST_HANG_IGNORE)
        #expect(Self.decide(traced: 1) == AFT_TEST_HANG_IGNORE)
        #expect(Self.decide(state: "T") == AFT_TEST_HANG_IGNORE)
        #expect(Self.decide(state: "t") == AFT_TEST_HANG_IGNORE)
        // Under the threshold the thread is alive whatever else holds.
        #expect(Self.decide(silentMs: 100, traced: 1) == AFT_TEST_HANG_ALIVE)
        // Off wins over ignored: nothing to count while paused.
        #expect(Self.decide(paused: 1, crashing: 1) == AFT_TEST_HANG_OFF)
    }
}
