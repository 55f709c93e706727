import CHarnessFaults
import Dispatch
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The functions children block in. Each is `@inline(never)` with a distinct name, so the
/// parent can find it in the symbolicated stack of the hang record.
enum Blocking {
    /// Waits on a condition variable nobody signals (futex wait, restarted after a signal).
    @inline(never)
    static func hangHarnessWaitOnSemaphore(seconds: Double) {
        let lock = Mutex()
        var condition = pthread_cond_t()
        pthread_cond_init(&condition, nil)
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let end = Double(now.tv_sec) + Double(now.tv_nsec) / 1e9 + seconds
        var deadline = timespec(tv_sec: Int(end), tv_nsec: Int((end - end.rounded(.down)) * 1e9))
        pthread_mutex_lock(lock.pointer)
        while pthread_cond_timedwait(&condition, lock.pointer, &deadline) != ETIMEDOUT {}
        pthread_mutex_unlock(lock.pointer)
        blackHole(lock)
    }

    /// Blocks in pthread_mutex_lock on a mutex another thread holds for `seconds`.
    @inline(never)
    static func hangHarnessLockWait(seconds: Double) {
        let lock = Mutex()
        let held = DispatchSemaphore(value: 0)
        let holder = Thread {
            pthread_mutex_lock(lock.pointer)
            held.signal()
            usleep(UInt32(seconds * 1_000_000))
            pthread_mutex_unlock(lock.pointer)
        }
        holder.start()
        held.wait()
        pthread_mutex_lock(lock.pointer)
        pthread_mutex_unlock(lock.pointer)
        blackHole(lock)
    }

    /// Waits in a ppoll of its own (the call the main run loop waits in, from deeper in the
    /// stack) on a pipe nobody writes to.
    @inline(never)
    static func hangHarnessPoll(seconds: Double) {
        hang_harness_ppoll(UInt32(seconds * 1000))
        blackHole(seconds)
    }

    /// Sleeps in usleep (clock_nanosleep: a handler would cut it short, so no signal is sent).
    @inline(never)
    static func hangHarnessSleep(seconds: Double) {
        usleep(UInt32(seconds * 1_000_000))
        blackHole(seconds)
    }

    /// Spins on the CPU.
    @inline(never)
    static func hangHarnessBusyLoop(seconds: Double) {
        let end = monotonicSeconds() + seconds
        var x: UInt64 = 1
        while monotonicSeconds() < end {
            for _ in 0..<1000 { x = x &* 6364136223846793005 &+ 1442695040888963407 }
        }
        blackHole(x)
    }

    /// An event loop's job that blocks its loop (a semaphore nobody signals).
    @inline(never)
    static func hangHarnessLoopBlock(seconds: Double) {
        hangHarnessWaitOnSemaphore(seconds: seconds)
        blackHole(seconds)
    }

    /// A short job of a busy loop.
    @inline(never)
    static func hangHarnessShortJob(milliseconds: Int) {
        hangHarnessBusyLoop(seconds: Double(milliseconds) / 1000)
    }

    /// An event loop's job that never returns.
    @inline(never)
    static func hangHarnessLoopForever() {
        hangHarnessWaitOnSemaphore(seconds: 1e6)
        blackHole(0)
    }

    /// A Task's synchronous wait on a semaphore: its pool thread is held.
    @inline(never)
    static func hangHarnessPoolBlock(seconds: Double) {
        _ = DispatchSemaphore(value: 0).wait(timeout: .now() + seconds)
        blackHole(seconds)
    }

    /// A daemon thread's block between two beats.
    @inline(never)
    static func hangHarnessThreadBlock(seconds: Double) {
        hangHarnessWaitOnSemaphore(seconds: seconds)
        blackHole(seconds)
    }

    /// A unit of work that takes too long.
    @inline(never)
    static func hangHarnessSlowRequest(seconds: Double) {
        hangHarnessWaitOnSemaphore(seconds: seconds)
        blackHole(seconds)
    }

    /// Spins until killed.
    @inline(never)
    static func hangHarnessBlockForever() -> Never {
        var x: UInt64 = 1
        while true {
            x = x &* 6364136223846793005 &+ 1
            blackHole(x)
        }
    }

    /// A plain pthread mutex, shared with the thread that holds it.
    final class Mutex: @unchecked Sendable {
        let pointer = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
        init() { pthread_mutex_init(pointer, nil) }
    }

    @inline(never)
    static func blackHole<T>(_ value: T) { withExtendedLifetime(value) {} }

    static func monotonicSeconds() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}
