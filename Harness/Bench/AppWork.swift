import Aftermath
import CHarnessFaults
import HarnessSupport
#if canImport(Glibc)
import Glibc
#endif

/// What a benchmark's child does around `Aftermath.start`, as an app would.
enum AppWork {
    /// The app's own work on the calling thread for the given milliseconds: a busy loop that
    /// touches nothing of Aftermath's.
    static func busy(milliseconds: UInt64) {
        let until = Monotonic.nanoseconds() + milliseconds * 1_000_000
        while Monotonic.nanoseconds() < until {}
    }

    /// Waits until start's delivery is done and its thread has ended or become the pinger
    /// (`aftermath.ping`, where nothing was pending), polling every
    /// `pollMicroseconds` for at most `maxPolls` polls in all.
    static func waitForDeliveryEnd(pollMicroseconds: UInt32, maxPolls: Int) {
        var polls = 0
        while Aftermath.lastDelivery == nil, polls < maxPolls {
            usleep(pollMicroseconds)
            polls += 1
        }
        // Its thread is named by then; it gives memory back (malloc_trim, its stack), then ends or
        // takes the pinger's name.
        while aft_test_thread_named("aftermath.deliv") == 1, polls < maxPolls {
            usleep(pollMicroseconds)
            polls += 1
        }
    }
}
