import CSignalShim
#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// A watched event loop, thread or kind of work, served by the one hang watchdog thread.
/// Returned by ``Aftermath/watchEventLoop(named:threshold:schedule:)``,
/// ``Aftermath/watchThread(named:threshold:)`` and ``Aftermath/watchWork(named:threshold:)``.
public struct HangWatch: Sendable, Hashable {
    let target: Int32

    /// One heartbeat of a watched thread, from that thread (the first thread to beat is the
    /// watched one): a relaxed add and a predicted branch, no allocation, no lock.
    public func beat() {
        aft_watch_beat(target)
    }

    /// Pauses this target's detection around an intended wait; nested, until as many
    /// ``resume()`` calls. The blocked time restarts from zero at resume.
    public func pause() {
        aft_watch_pause(target)
    }

    /// Ends one ``pause()``.
    public func resume() {
        aft_watch_resume(target)
    }

    /// Runs `body` with this target's detection paused.
    @discardableResult
    public func withoutHangDetection<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        pause()
        defer { resume() }
        return try body()
    }

    /// One unit of work of a work target, on the calling thread: flagged as a hang when it
    /// lasts longer than the threshold. Zero cost while no unit is open; a unit costs two
    /// atomic operations and a clock read. Must end on the thread it began on; a unit whose
    /// thread ends first ends then.
    public func begin() -> WorkUnit {
        WorkUnit(unit: aft_work_begin(target))
    }

    /// Runs `body` as one unit of work on the calling thread.
    @discardableResult
    public func measure<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        let unit = begin()
        defer { unit.end() }
        return try body()
    }

    /// Stops watching. A hang in progress ends now. Stopping a target that already ended (its
    /// loop shut down, its thread ended) changes nothing.
    public func stop() {
        HangMonitor.schedules.withLock { _ = $0.removeValue(forKey: target) }
        aft_watch_remove(target)
    }
}

/// A unit of work in progress (``HangWatch/begin()``).
public struct WorkUnit: Sendable, Hashable {
    let unit: Int32

    /// False when every unit slot was taken at begin (256 at once): this unit is not watched.
    public var isWatched: Bool { unit >= 0 }

    /// Ends the unit; a hang it was in ends now.
    public func end() {
        aft_work_end(unit)
    }
}

/// Why a target could not be watched.
public enum HangWatchError: Error, Sendable, Hashable {
    /// Every one of the watchdog's targets is taken (255 besides the main thread).
    case tooManyTargets
    /// The threshold is zero.
    case invalidThreshold
}

extension Aftermath {
    /// The default threshold of event loops: a stalled loop stalls every connection on it.
    public static let defaultEventLoopThreshold: Duration = .milliseconds(500)
    /// The default threshold of the Swift concurrency pool's probe.
    public static let defaultConcurrencyPoolThreshold: Duration = .seconds(1)
    /// The default threshold of watched threads and units of work.
    public static let defaultThreadThreshold: Duration = .seconds(1)

    /// Watches an event loop: `schedule` runs a job on the loop (`{ loop.execute($0) }` for a
    /// SwiftNIO `EventLoop`), which the watchdog posts about every 100 ms while the loop is
    /// busy. A loop waiting in `epoll_wait`, `poll` or `select` is idle: never reported, and
    /// pinged at most every 2 s. A ping not run within `threshold` is a hang of kind
    /// `event_loop`, with the loop thread's stack. A loop whose thread ends (the group was shut
    /// down) is no longer watched, as if stopped; call ``HangWatch/stop()`` before the shutdown
    /// to be sure no ping reaches a loop that refuses jobs.
    @discardableResult
    public static func watchEventLoop(
        named name: String, threshold: Duration = defaultEventLoopThreshold,
        schedule: @escaping @Sendable (@escaping @Sendable () -> Void) -> Void
    ) throws(HangWatchError) -> HangWatch {
        // Added under the schedules' lock: the first ping, asked for at once, finds its schedule.
        let result = HangMonitor.schedules.withLock { schedules -> Result<HangWatch, HangWatchError> in
            schedules.removeEnded()
            do throws(HangWatchError) {
                let watch = try add(kind: AFT_HANG_KIND_EVENT_LOOP, name: name, threshold: threshold)
                schedules[watch.target] = schedule
                return .success(watch)
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    /// Watches a thread with a loop of its own (GLib, SDL, a daemon's worker): it calls
    /// ``HangWatch/beat()`` at least every 100 ms, and ``HangWatch/pause()`` around longer
    /// intended waits. No beat within `threshold` is a hang of kind `thread`. When that thread
    /// ends, the target ends with it (and a hang it was in), as if stopped.
    @discardableResult
    public static func watchThread(
        named name: String, threshold: Duration = defaultThreadThreshold
    ) throws(HangWatchError) -> HangWatch {
        try add(kind: AFT_HANG_KIND_THREAD, name: name, threshold: threshold)
    }

    /// Watches a kind of work (request handlers, jobs): each ``HangWatch/begin()`` ...
    /// ``WorkUnit/end()`` (or ``HangWatch/measure(_:)``) that lasts longer than `threshold` is
    /// a hang of kind `work`, with the stack of the thread doing it.
    @discardableResult
    public static func watchWork(
        named name: String, threshold: Duration = defaultThreadThreshold
    ) throws(HangWatchError) -> HangWatch {
        try add(kind: AFT_HANG_KIND_WORK, name: name, threshold: threshold)
    }

    static func add(kind: UInt32, name: String, threshold: Duration) throws(HangWatchError) -> HangWatch {
        let ms = threshold.clampedMilliseconds
        guard ms > 0 else { throw .invalidThreshold }
        let target = aft_watch_add(kind, name, ms)
        guard target > 0 else { throw target == -EINVAL ? .invalidThreshold : .tooManyTargets }
        return HangWatch(target: target)
    }
}
