import AftermathNextLaunch
/// Where the hang watchdog's heartbeat comes from (``Aftermath/Configuration/hangHeartbeat``).
public enum HangHeartbeat: Sendable, Hashable {
    /// The SDK pings `DispatchQueue.main` about every 100 ms; the thread that runs the ping is
    /// watched. Covers `RunLoop.main.run()`, `dispatchMain()` and `@MainActor` work. Detection
    /// starts once the first ping ran, so an app that never drains the main queue is never
    /// reported as hung.
    case mainQueue
    /// The app's own loop calls ``Aftermath/heartbeat()`` at least every 100 ms (every
    /// iteration is fine); the first thread to call it is watched. A loop that sleeps longer
    /// between iterations must call ``Aftermath/pauseHangDetection()`` around the wait.
    case manual
    /// No hang detection.
    case off
}
