import CHarnessFaults
import CSignalShim
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The walk of a thread's Swift async callers (swift_chain_async.c) on memory the test lays out:
/// a fake AsyncTask (its first word the runtime's task metadata, its resume context at word 8)
/// and fake contexts (Parent, ResumeParent). Hostile and random values end the walk, never the
/// process.
@Suite("Swift async chain walk")
struct SwiftAsyncWalkTests {
    /// 16-byte aligned words that stay put for the test.
    final class Memory {
        let words: UnsafeMutablePointer<UInt64>
        let count: Int
        init(_ count: Int) {
            var raw: UnsafeMutableRawPointer?
            precondition(posix_memalign(&raw, 16, count * 8) == 0)
            words = raw!.bindMemory(to: UInt64.self, capacity: count)
            words.initialize(repeating: 0, count: count)
            self.count = count
        }
        deinit { free(words) }
        func address(_ word: Int) -> UInt64 { UInt64(UInt(bitPattern: words + word)) }
    }

    let metadata = aft_test_swift_task_metadata()
    let code = aft_test_swift_code_address()

    /// A task at word 0 (its resume context `first`), the current-task word at word 20 pointing
    /// to it, and contexts from word 32 on, two words each.
    func layout(_ m: Memory, chain: Int, first: Int = 0) {
        m.words[0] = metadata
        m.words[8] = m.address(32 + 2 * first)
        m.words[20] = m.address(0)
        for i in 0..<chain {
            m.words[32 + 2 * i] = i + 1 < chain ? m.address(32 + 2 * (i + 1)) : 0
            m.words[33 + 2 * i] = code + UInt64(i)
        }
    }

    func walk(_ m: Memory, register: UInt64 = 0, fp: UInt64 = 0, room: UInt32 = 128) -> [aft_swift_async_link] {
        var out = [aft_swift_async_link](repeating: aft_swift_async_link(), count: 128)
        let n = aft_test_swift_chain(m.words + 20, register, fp, &out, room)
        return Array(out.prefix(Int(n)))
    }

    @Test("A task's chain is followed from its resume context to its root")
    func followedToRoot() throws {
        try #require(metadata != 0, "the Swift concurrency runtime is loaded")
        let m = Memory(128)
        layout(m, chain: 3)
        let links = walk(m)
        #expect(links.map(\.resume) == [code, code + 1, code + 2])
        #expect(links.map(\.depth) == [0, 1, 2])
        #expect(links[0].flags & UInt32(AFT_SWIFT_ASYNC_FROM_TASK) != 0)
        #expect(links[2].flags & UInt32(AFT_SWIFT_ASYNC_ROOT) != 0)
    }

    @Test("A context register that leads into the task's chain starts it, links that returned left out")
    func registerJoins() throws {
        try #require(metadata != 0)
        let m = Memory(128)
        layout(m, chain: 4)
        // The task last resumed in a call that has returned (context 0); the running function's
        // callee context (word 100) leads to context 1.
        m.words[100] = m.address(34)
        m.words[101] = code + 50
        let links = walk(m, register: m.address(100))
        #expect(links.map(\.resume) == [code + 50, code + 1, code + 2, code + 3])
        #expect(links[0].flags & UInt32(AFT_SWIFT_ASYNC_FROM_REGISTER) != 0)
        // A frame record whose slot below the saved frame pointer holds context 2.
        m.words[110] = m.address(36)  // [fp - 8]
        m.words[111] = 0  // [fp]: no caller record
        m.words[112] = code  // return address
        let fromFrame = walk(m, fp: m.address(111))
        #expect(fromFrame.map(\.resume) == [code + 2, code + 3])
        #expect(fromFrame[0].flags & UInt32(AFT_SWIFT_ASYNC_FROM_FRAME) != 0)
    }

    @Test("Cycles, misaligned, unmapped and non-code links end the walk; so does a foreign task")
    func hostileChains() throws {
        try #require(metadata != 0)
        let m = Memory(128)
        layout(m, chain: 3)
        m.words[32] = m.address(32)  // a context its own parent
        #expect(walk(m).count == 1)
        layout(m, chain: 3)
        m.words[34] = m.address(32)  // 0 -> 1 -> 0 -> ...: cut at the cap
        let cycle = walk(m)
        #expect(cycle.count == 128)
        #expect(cycle.last!.flags & UInt32(AFT_SWIFT_ASYNC_CUT) != 0)
        layout(m, chain: 3)
        m.words[34] = m.address(32) + 8  // misaligned parent
        #expect(walk(m).count == 2)
        layout(m, chain: 3)
        m.words[34] = 0x10  // the null page
        #expect(walk(m).count == 2)
        layout(m, chain: 3)
        m.words[34] = 0x0000_7fff_ffff_fff0  // unmapped
        #expect(walk(m).count == 2)
        layout(m, chain: 3)
        m.words[35] = 0x1234  // resumes outside any image's code
        #expect(walk(m).count == 1)
        layout(m, chain: 3)
        m.words[0] = metadata ^ 0x10  // not an AsyncTask
        #expect(walk(m).isEmpty)
        layout(m, chain: 3)
        m.words[20] = 0xdead_beef_0000  // the current-task word points nowhere
        #expect(walk(m).isEmpty)
        layout(m, chain: 3)
        #expect(walk(m, room: 2).count == 2)
        #expect(walk(m, room: 2).last!.flags & UInt32(AFT_SWIFT_ASYNC_CUT) != 0)
        // A register and a frame record of garbage change nothing.
        #expect(walk(m, register: 0xe100_0000_0000_0000, fp: 0x7).map(\.resume) == [code, code + 1, code + 2])
    }

    @Test("Random values as task, context register, frame pointer and chain: the walk always ends")
    func randomValues() throws {
        try #require(metadata != 0)
        let m = Memory(512)
        var generator = SystemRandomNumberGenerator()
        for round in 0..<3000 {
            for i in 0..<m.count {
                // Mostly pointers into the buffer (aligned or not), some code, some garbage.
                switch UInt64.random(in: 0..<6, using: &generator) {
                case 0: m.words[i] = m.address(Int.random(in: 0..<m.count, using: &generator))
                case 1: m.words[i] = m.address(Int.random(in: 0..<m.count, using: &generator)) + 8
                case 2: m.words[i] = code &+ UInt64.random(in: 0..<64, using: &generator)
                case 3: m.words[i] = 0
                default: m.words[i] = UInt64.random(in: 0...UInt64.max, using: &generator)
                }
            }
            if round % 2 == 0 { m.words[0] = metadata }
            m.words[20] = round % 3 == 0 ? UInt64.random(in: 0...UInt64.max, using: &generator) : m.address(0)
            let links = walk(
                m, register: m.words[Int.random(in: 0..<m.count, using: &generator)],
                fp: m.address(Int.random(in: 1..<m.count, using: &generator)),
                room: UInt32.random(in: 1...128, using: &generator))
            #expect(links.count <= 128)
            for (i, link) in links.enumerated() {
                #expect(link.context & 15 == 0)
                #expect(link.depth == UInt32(i))
            }
        }
    }
}
