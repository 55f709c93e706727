/// Why a run ended without a crash report: apsio.exit.reason. No other values.
package enum ExitReason: String, Sendable, Hashable, CaseIterable {
    /// Killed for memory: an OOM kill, or memory pressure seen near the end.
    case memory
    /// Killed by a watchdog (systemd's WatchdogSec) while not answering.
    case watchdog
    /// A background task ran out of time (not observable on Linux; kept for the profile).
    case backgroundTaskTimeout = "background_task_timeout"
    /// Killed for temperature (not observable on Linux; kept for the profile).
    case thermal
    /// Killed while its main thread was hung (an unfinished hang of the run).
    case anr
    /// Ended by a signal it did not survive (SIGTERM, SIGINT, SIGHUP).
    case signal
    /// No evidence of why.
    case unknown
}
