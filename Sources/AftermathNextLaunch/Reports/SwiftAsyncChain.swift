import CSignalShim

/// The Swift async callers of one thread's frames, innermost first: where each caller resumes
/// (a continuation funclet's entry), read from the task's async contexts at the crash, hang or
/// handled error. Machine frames show the innermost async function and the executor; its
/// callers are only here.
package struct SwiftAsyncChain: Sendable, Hashable {
    /// Where the walk found the first context.
    package enum Anchor: String, Sendable, Hashable {
        /// The async context register (x86-64 r14, arm64 x22).
        case register
        /// The slot below a frame record's saved frame pointer, where an async frame keeps it.
        case frame
        /// The task's resume context: calls that returned since it resumed may come first.
        case task
    }

    /// Each caller's resume address, innermost first; the task's entry last.
    package var resumes: [UInt64]
    /// The async context of each link, in the same order.
    package var contexts: [UInt64]
    package var anchor: Anchor
    /// The walk reached the task's root (a context without a parent).
    package var reachedRoot: Bool
    /// The chain went on past what was recorded (a link unreadable or invalid, or the cap).
    package var isCut: Bool

    /// Groups a SWIFT_ASYNC section's links by thread: each thread's first run of links (depth
    /// 0 starts one). Links of a thread already seen are ignored, as are links out of order.
    package static func chains(from links: [aft_swift_async_link]) -> [UInt64: SwiftAsyncChain] {
        var result: [UInt64: SwiftAsyncChain] = [:]
        var current: (id: UInt64, chain: SwiftAsyncChain)?
        func close() {
            if let c = current, result[c.id] == nil { result[c.id] = c.chain }
            current = nil
        }
        for link in links {
            if link.depth == 0 {
                close()
                let flags = link.flags
                let anchor: Anchor =
                    flags & UInt32(AFT_SWIFT_ASYNC_FROM_REGISTER) != 0
                    ? .register : flags & UInt32(AFT_SWIFT_ASYNC_FROM_FRAME) != 0 ? .frame : .task
                current = (
                    link.thread_id,
                    SwiftAsyncChain(resumes: [], contexts: [], anchor: anchor, reachedRoot: false, isCut: false)
                )
            }
            guard var c = current, c.id == link.thread_id, Int(link.depth) == c.chain.resumes.count,
                c.chain.resumes.count < Int(AFT_SWIFT_ASYNC_MAX_LINKS)
            else {
                close()
                continue
            }
            c.chain.resumes.append(link.resume)
            c.chain.contexts.append(link.context)
            c.chain.reachedRoot = link.flags & UInt32(AFT_SWIFT_ASYNC_ROOT) != 0
            c.chain.isCut = link.flags & UInt32(AFT_SWIFT_ASYNC_CUT) != 0
            current = c
        }
        close()
        return result.filter { !$0.value.resumes.isEmpty }
    }

    /// The section's entries for this chain of thread id (handled-error files).
    package func links(threadID: UInt64) -> [aft_swift_async_link] {
        resumes.indices.map { i in
            var flags: UInt32 = 0
            if i == 0 {
                switch anchor {
                case .register: flags |= UInt32(AFT_SWIFT_ASYNC_FROM_REGISTER)
                case .frame: flags |= UInt32(AFT_SWIFT_ASYNC_FROM_FRAME)
                case .task: flags |= UInt32(AFT_SWIFT_ASYNC_FROM_TASK)
                }
            }
            if i == resumes.count - 1 {
                if reachedRoot { flags |= UInt32(AFT_SWIFT_ASYNC_ROOT) }
                if isCut { flags |= UInt32(AFT_SWIFT_ASYNC_CUT) }
            }
            return aft_swift_async_link(
                thread_id: threadID, context: i < contexts.count ? contexts[i] : 0, resume: resumes[i], flags: flags,
                depth: UInt32(i))
        }
    }
}
