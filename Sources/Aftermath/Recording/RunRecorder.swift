import AftermathNextLaunch
import CSignalShim
import Foundation
import Synchronization

/// This process's run record (runs/<run id>.run) and the run-wide state records carry:
/// the session, the previous session, the screen and the foreground state.
enum RunRecorder {
    struct State: Sendable {
        var sessionID = StartHelpers.randomUUID()
        var previousSessionID: UUID?
        var screen: String?
        /// Why the run file could not be written, when it could not.
        var error: String?
    }

    static let state = Mutex(State())

    /// Creates and locks this run's file before ``Aftermath/start(_:)`` returns, installs the
    /// termination-signal recorder and starts the once-a-second updater. Never throws: a
    /// reports directory that cannot hold it leaves the app running without a run record.
    static func start(
        _ configuration: Aftermath.Configuration, directory: ReportDirectory, context: ReportContext
    ) {
        let screen = state.withLock { s -> String? in
            s.sessionID = context.sessionID
            s.previousSessionID = nil
            return s.screen
        }
        aft_watchdog_set_previous_session(nil)
        var options = aft_run_options()
        aft_installed_context(&options.context)  // as the crash handler holds it
        options.watchdog_usec = watchdogMicroseconds()
        options.update_interval_ms = configuration.runUpdateInterval.clampedMilliseconds
        options.catch_termination = configuration.recordTerminationSignals ? 1 : 0
        options.start_updater = AFT_RUN_UPDATER_LATER  // by Aftermath.startBackgroundThreads()
        let (status, error) = StartHelpers.withErrorMessage { error, capacity in
            directory.runs.withCString { runs in
                configuration.procRoot.withCString { proc in
                    configuration.sysRoot.withCString { sys in
                        options.runs_directory = runs
                        options.proc_root = proc
                        options.sys_root = sys
                        return aft_run_start(&options, error, capacity)
                    }
                }
            }
        }
        let message = status == 0 ? nil : error
        state.withLock { $0.error = message }
        if status == 0, let screen { aft_run_set_screen(screen) }
    }

    /// systemd's WATCHDOG_USEC when it is meant for this process (WATCHDOG_PID absent or ours).
    static func watchdogMicroseconds() -> UInt64 {
        // getenv, not ProcessInfo's environment: start runs this on the app's thread, and the
        // whole environment as a dictionary costs a tenth of a millisecond or more.
        func variable(_ name: String) -> String? { getenv(name).map { String(cString: $0) } }
        guard let usec = variable("WATCHDOG_USEC").flatMap(UInt64.init) else { return 0 }
        if let pid = variable("WATCHDOG_PID").flatMap(Int32.init), pid != getpid() { return 0 }
        return usec
    }

    /// Starts a new session: records the current one as the previous.
    static func startNewSession() -> UUID {
        let new = UUID()
        let previous = state.withLock { s -> UUID in
            let previous = s.sessionID
            s.previousSessionID = previous
            s.sessionID = new
            return previous
        }
        Aftermath.state.withLock { running in
            guard let old = running else { return }
            var context = old.context
            context.sessionID = new
            running = Aftermath.Running(configuration: old.configuration, directory: old.directory, context: context)
        }
        let newBytes = new.bytes, previousBytes = previous.bytes
        aft_set_session_id(newBytes)
        aft_run_set_session(newBytes, previousBytes)
        // Crash files take it from this run's file on the next launch; hang files carry it.
        aft_watchdog_set_previous_session(previousBytes)
        return new
    }

    static func setScreen(_ name: String?) {
        state.withLock { $0.screen = name }
        aft_run_set_screen(name ?? "")
    }

}
