import Aftermath
import AftermathTesting
import CSignalShim
import Foundation
import Synchronization
import Testing
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// A thread's last frees stay in its own cache (glibc's tcache) until it ends, after its last
/// call: the delivery thread's trim is made again by the run record's updater once it is gone.
@Suite("A thread's heap, given back after it ended")
struct ArenaReleaseTests {
    struct Span {
        var start: UInt
        var end: UInt
        var pin: UnsafeMutableRawPointer?
        var refusedAlive: Bool
        /// Resident pages inside the span on the thread, after its own trim (its cache held them).
        var residentAtItsEnd = 0
    }

    /// On a thread: seven chunks of each of 32 cached sizes (about 170 KiB, before a pin that
    /// keeps them off the arena's top), all freed into the thread's cache, then the release asked
    /// for as the delivery thread does. Returns once the thread is gone from /proc/self/task.
    static func allocateAndFreeOnAThread() -> Span {
        let result = Mutex<(UInt, UInt, UInt, Bool, Int32, Int)>((0, 0, 0, false, 0, 0))
        let done = DispatchSemaphore(value: 0)
        let thread = Thread {
            var chunks: [UnsafeMutableRawPointer] = []
            chunks.reserveCapacity(7 * 32)
            for size in stride(from: 520, to: 1032, by: 16) {
                for _ in 0..<7 { chunks.append(malloc(size)!) }
            }
            for chunk in chunks { memset(chunk, 1, 16) }
            let pin = malloc(32)!
            let addresses = chunks.map { UInt(bitPattern: $0) }
            chunks.forEach { free($0) }
            aft_release_free_memory()
            let refused = aft_release_memory_of_ended_thread() == 0
            var span = Span(start: addresses.min()!, end: addresses.max()!, pin: nil, refusedAlive: refused)
            span.residentAtItsEnd = residentInside(span)
            result.withLock {
                $0 = (span.start, span.end, UInt(bitPattern: pin), refused, Int32(aft_gettid()), span.residentAtItsEnd)
            }
            done.signal()
        }
        thread.start()
        done.wait()
        let (start, end, pin, refused, tid, resident) = result.withLock { $0 }
        for _ in 0..<1000 where access("/proc/self/task/\(tid)", F_OK) == 0 { usleep(1000) }
        var span = Span(start: start, end: end, pin: UnsafeMutableRawPointer(bitPattern: pin), refusedAlive: refused)
        span.residentAtItsEnd = resident
        return span
    }

    /// Resident pages strictly inside [start, end), page-aligned inward.
    static func residentInside(_ span: Span) -> Int {
        let page = UInt(sysconf(Int32(_SC_PAGESIZE)))
        let low = (span.start + page) & ~(page - 1)
        let high = span.end & ~(page - 1)
        guard high > low else { return -1 }
        return TestSupport.residentPages(low, high)
    }

    @Test("The pages an ended thread's cache held are resident until the second trim, gone after")
    func trimAfterTheThreadEnded() async {
        await #expect(processExitsWith: .success) {
            let span = ArenaReleaseTests.allocateAndFreeOnAThread()
            guard span.refusedAlive else { exit(10) }  // while it ran, nothing was trimmed
            let before = ArenaReleaseTests.residentInside(span)
            let made = aft_release_memory_of_ended_thread()
            let after = ArenaReleaseTests.residentInside(span)
            let again = aft_release_memory_of_ended_thread()
            free(span.pin)
            guard before >= 30 else { exit(11) }  // about 40 pages
            guard made == 1, again == 0 else { exit(12) }
            exit(after <= 2 ? 0 : 13)
        }
    }

    /// Starts Aftermath as an app would, its run record updated every 50 ms and no watchdog, in
    /// a fresh reports directory; returns the directory (exits 10 when start fails).
    /// With pending: a report waits for the delivery (a handled error recorded by an earlier
    /// start), whose thread then ends; with nothing pending it stays as the run's updater.
    static func startWithFrequentUpdates(pending: Bool = false) -> String {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent(
            "aftermath-arena-\(UUID().uuidString)"
        ).path
        if pending, !StartAndDeliveryTests.leaveReportPending(in: root, service: "arena-test") { exit(10) }
        var config = Aftermath.Configuration(
            serviceName: "arena-test", serviceVersion: "1.0", exporter: InMemoryExporter(),
            reportsDirectory: root)
        config.runUpdateInterval = .milliseconds(50)
        config.hangHeartbeat = .off
        do { try Aftermath.start(config) } catch { exit(10) }
        return root
    }

    @Test("In a running app, the run record's updater makes the second trim")
    func updaterTrims() async {
        await #expect(processExitsWith: .success) {
            let root = ArenaReleaseTests.startWithFrequentUpdates()
            defer { try? FileManager.default.removeItem(atPath: root) }
            for _ in 0..<500 where Aftermath.lastDelivery == nil { usleep(10_000) }
            usleep(200_000)  // the delivery thread has ended, and its trim is made
            let span = ArenaReleaseTests.allocateAndFreeOnAThread()
            // Measured on the thread: the updater may trim as soon as it has ended.
            let before = span.residentAtItsEnd
            usleep(300_000)  // six updates
            let after = ArenaReleaseTests.residentInside(span)
            free(span.pin)
            guard before >= 30 else { exit(11) }
            // The app's other threads may share the arena and reuse a few of those pages.
            exit(after * 4 <= before ? 0 : 12)
        }
    }

    @Test(
        "The delivery thread's stack is unmapped once the thread has ended (it had reports to send), not kept for a later thread"
    )
    func deliveryStackUnmapped() async {
        await #expect(processExitsWith: .success) {
            let root = ArenaReleaseTests.startWithFrequentUpdates(pending: true)
            defer { try? FileManager.default.removeItem(atPath: root) }
            let stack = aft_own_stack_address()
            guard stack != 0 else { exit(11) }  // the delivery thread runs on a stack of its own
            let page = Int(sysconf(Int32(_SC_PAGESIZE)))
            guard msync(UnsafeMutableRawPointer(bitPattern: stack), page, MS_ASYNC) == 0 else { exit(12) }
            for _ in 0..<500 where Aftermath.lastDelivery == nil { usleep(10_000) }
            for _ in 0..<200 where aft_own_stack_address() != 0 { usleep(10_000) }
            guard aft_own_stack_address() == 0 else { exit(13) }
            // Unmapped: no page of it is there any more.
            let unmapped = msync(UnsafeMutableRawPointer(bitPattern: stack), page, MS_ASYNC) != 0 && errno == ENOMEM
            exit(unmapped ? 0 : 14)
        }
    }
}
