import AftermathNextLaunch
import CSignalShim

extension Aftermath {
    /// One heartbeat from the app's own loop, for ``HangHeartbeat/manual``: two relaxed memory
    /// accesses, no allocation, no lock. The first thread to call it is the one watched.
    @inlinable
    public static func heartbeat() {
        aft_heartbeat()
    }

    /// Makes the next thread that calls ``heartbeat()`` the watched thread (a loop that moved
    /// to another thread).
    public static func watchNextHeartbeatThread() {
        aft_watchdog_watch_next_heartbeat_thread()
    }

    /// Pauses hang detection around intentional blocking (a modal wait, a long synchronous
    /// load). Nested: detection resumes after as many ``resumeHangDetection()`` calls. While
    /// paused the watchdog does not wake up.
    public static func pauseHangDetection() {
        aft_watchdog_pause()
    }

    /// Ends one ``pauseHangDetection()``. The blocked time restarts from zero.
    public static func resumeHangDetection() {
        aft_watchdog_resume()
    }

    /// Starts the watchdog for this run (called by ``start(_:)`` once the handlers are in).
    @inline(never)  // its options stay out of start's frame on the caller's stack
    static func startHangDetection(_ configuration: Configuration, directory: ReportDirectory) throws(StartError) {
        try HangMonitor.start(configuration, directory: directory)
    }
}
