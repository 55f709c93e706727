import CHarnessFaults
import CSignalShim
import Foundation
import Synchronization
import Testing
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// A thread that ends gives its stack to glibc's cache with every page its deepest call touched:
/// the delivery thread releases the pages below its last frame before it ends.
@Suite("A thread's stack below its frame, given back")
struct StackReleaseTests {
    /// What a thread saw: pages resident below its frame before and after the release.
    struct Observation: Sendable {
        var released = 0
        var residentBefore = 0
        var residentAfter = 0
        var frameStillResident = false
    }

    static func resident(_ start: UInt, _ end: UInt) -> Int { TestSupport.residentPages(start, end) }

    @Test("Pages a deep call touched are no longer resident; the thread's own frame is")
    func releasesBelowFrame() {
        let done = DispatchSemaphore(value: 0)
        let result = Mutex(Observation())
        let thread = Thread {
            let page = UInt(sysconf(Int32(_SC_PAGESIZE)))
            var marker = 0
            let here = withUnsafeMutablePointer(to: &marker) { UInt(bitPattern: $0) }
            // What a deep call leaves: 16 pages written from 16 KiB below this frame down.
            let top = (here - 16 * 1024) & ~(page - 1)
            let bottom = top - 16 * page
            var address = bottom
            while address < top {
                UnsafeMutablePointer<UInt8>(bitPattern: address)!.pointee = 1
                address += page
            }
            var observed = Observation()
            observed.residentBefore = Self.resident(bottom, top)
            observed.released = aft_release_thread_stack_below()
            observed.residentAfter = Self.resident(bottom, top)
            let herePage = here & ~(page - 1)
            observed.frameStillResident = Self.resident(herePage, herePage + page) == 1
            result.withLock { $0 = observed }
            done.signal()
        }
        thread.stackSize = 1 << 20
        thread.start()
        done.wait()
        let observed = result.withLock { $0 }
        #expect(observed.residentBefore == 16)
        #expect(observed.released >= 16 * 4096)
        #expect(observed.residentAfter == 0)
        #expect(observed.frameStillResident)
    }

    /// The images' read at the install's completion borrows the bottom of the delivery thread's
    /// own stack rather than a mapping of its own: only there, only with room below the
    /// caller, and its pages go back with the stack's.
    @Test("The delivery thread's stack bottom as scratch: only on that stack, given back with it")
    func ownStackScratch() {
        let result = aft_test_own_stack_scratch()
        #expect(result == 0 || result == -1, "check \(result) of own_stack_scratch.c failed")
    }
}
