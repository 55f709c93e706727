import AftermathNextLaunch
import AftermathSymbolication
import CSignalShim
import Testing

@Suite("Swift async frames")
struct SwiftAsyncFramesTests {
    @Test("A funclet's function is its name without TQ<n>_ or TY<n>_")
    func funcletFunction() {
        #expect(
            SwiftAsyncFunction.function(ofFunclet: "$s3app6level3yS2iYaFTf4d_nTY1_") == "$s3app6level3yS2iYaFTf4d_n")
        #expect(SwiftAsyncFunction.function(ofFunclet: "$s3app6level3yS2iYaFTQ12_") == "$s3app6level3yS2iYaF")
        #expect(SwiftAsyncFunction.function(ofFunclet: "$s3app6level3yS2iYaF") == "$s3app6level3yS2iYaF")
        #expect(SwiftAsyncFunction.function(ofFunclet: "TQ0_") == "TQ0_")
        #expect(SwiftAsyncFunction.function(ofFunclet: "memcpy") == "memcpy")
        #expect(!SwiftAsyncFunction.isAsync(mangled: "memcpy", demangled: "memcpy"))
        #expect(SwiftAsyncFunction.isAsync(mangled: "$s3app6level3yS2iYaFTQ0_", demangled: "x"))
    }

    @Test("A task-anchored chain drops the links up to the innermost async machine frame's function")
    func staleLinks() {
        let machine: [(mangled: String, demangled: String)?] = [
            ("$s3app4boomyyF", "app.boom() -> ()"),
            ("$s3app6level3yS2iYaFTY1_", "(1) suspend resume partial function for app.level3() async"),
            nil,
        ]
        let chain: [String?] = [
            "$sScTss5NeverORszABRs_rlE5yieldyyYaFZTQ1_", "$s3app6level3yS2iYaFTQ0_", "$s3app6level2yS2iYaFTQ1_",
        ]
        #expect(SwiftAsyncFunction.staleLinks(machine: machine, chain: chain, anchor: "task") == 2)
        // A chain anchored at the running function's own context keeps every link (recursion).
        #expect(SwiftAsyncFunction.staleLinks(machine: machine, chain: chain, anchor: "register") == 0)
        #expect(SwiftAsyncFunction.staleLinks(machine: [nil], chain: chain, anchor: "task") == 0)
    }

    @Test("A section's links become one chain per thread; out-of-order and repeated ones are dropped")
    func grouping() {
        func link(_ tid: UInt64, _ depth: UInt32, _ resume: UInt64, _ flags: UInt32 = 0) -> aft_swift_async_link {
            aft_swift_async_link(thread_id: tid, context: resume * 16, resume: resume, flags: flags, depth: depth)
        }
        let links = [
            link(7, 0, 1, UInt32(AFT_SWIFT_ASYNC_FROM_FRAME)), link(7, 1, 2),
            link(7, 2, 3, UInt32(AFT_SWIFT_ASYNC_ROOT)),
            link(8, 0, 10), link(8, 2, 12),  // a gap: thread 8 keeps its first link
            link(7, 0, 99),  // thread 7 again: ignored
            link(9, 5, 50),  // no start: ignored
        ]
        let chains = SwiftAsyncChain.chains(from: links)
        #expect(chains[7]?.resumes == [1, 2, 3])
        #expect(chains[7]?.anchor == .frame)
        #expect(chains[7]?.reachedRoot == true)
        #expect(chains[8]?.resumes == [10])
        #expect(chains[8]?.anchor == .task)
        #expect(chains[9] == nil)
        // And back: the links a handled-error file holds.
        let again = SwiftAsyncChain.chains(from: chains[7]!.links(threadID: 7))
        #expect(again[7] == chains[7])
    }
}
