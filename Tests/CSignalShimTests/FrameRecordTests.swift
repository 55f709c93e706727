import CHarnessFaults
import Testing

/// The first frame record above a stack pointer, where the walk of a thread known by sp and pc
/// (or of a thread paused in a system call, in a hang's capture) starts: a word that points into
/// the mapping just above the stack (a malloc arena's heap, which the kernel places there at
/// times) beside a return address is not taken for a record, since what it points at is none.
@Suite("Frame record above sp")
struct FrameRecordTests {
    struct Found {
        var offset: Int64 = -2
        var frames: [UInt64] = []
        var returnAddress: UInt64 = 0
    }

    func find(decoy: Bool) -> Found {
        var found = Found()
        var frames = [UInt64](repeating: 0, count: 16)
        var count: UInt32 = 0
        let status = frames.withUnsafeMutableBufferPointer {
            aft_test_frame_record_above(
                decoy ? 1 : 0, &found.offset, $0.baseAddress, UInt32($0.count), &count, &found.returnAddress)
        }
        #expect(status == 0)
        found.frames = Array(frames.prefix(Int(count)))
        return found
    }

    @Test("the record linked to another is found")
    func plain() {
        let found = find(decoy: false)
        #expect(found.offset == 64)
        #expect(found.frames.suffix(2) == [found.returnAddress, found.returnAddress])
    }

    @Test("a pointer into the mapping above, beside a return address, is no record")
    func pointerAboveTheStack() {
        let found = find(decoy: true)
        #expect(found.offset == 64)
        #expect(!found.frames.contains(3), "\(found.frames) \(found.returnAddress)")
        #expect(found.frames.suffix(2) == [found.returnAddress, found.returnAddress])
    }
}
