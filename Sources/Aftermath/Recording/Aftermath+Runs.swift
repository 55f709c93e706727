import AftermathNextLaunch
import CSignalShim
import Foundation

extension Aftermath {
    /// Starts this run's record and the handled-error recorder (called by ``start(_:)``
    /// before it returns, after the crash handler is installed). Never inlined: its C context
    /// and run options would widen start's frame on the caller's stack.
    @inline(never)
    static func startRun(_ configuration: Configuration, directory: ReportDirectory, context: ReportContext) {
        // Both take the context as the crash handler holds it (its build id included), each
        // copied where it keeps it: none passes through this frame.
        RunRecorder.start(configuration, directory: directory, context: context)
        HandledErrorRecorder.prepare(directory: directory.errors, maxPending: configuration.maxPendingErrors)
    }

    /// Tells Aftermath whether the app is in the foreground (the default). Hangs are detected
    /// only in the foreground, and an abnormal exit is inferred only for a run that ended there.
    public static func setForeground(_ foreground: Bool) {
        let hold = FileSizeSignalHold()  // a write past ulimit -f fails; it never ends the app
        defer { hold.release() }
        aft_watchdog_set_foreground(foreground ? 1 : 0)
        _ = aft_run_update_now()  // the run record says so at once, not at its next update
    }

    /// Names the screen the app shows (app.screen.name on the run's abnormal exit and on
    /// handled errors); nil clears it. Written to the run record at once.
    public static func setScreen(_ name: String?) {
        let hold = FileSizeSignalHold()  // a write past ulimit -f fails; it never ends the app
        defer { hold.release() }
        RunRecorder.setScreen(name)
    }

    /// Starts a new session (for long-running apps): a new session.id for every later record
    /// of this run, the old one kept as session.previous_id. Returns the new id.
    @discardableResult
    public static func startNewSession() -> UUID {
        let hold = FileSizeSignalHold()  // a write past ulimit -f fails; it never ends the app
        defer { hold.release() }
        let id = RunRecorder.startNewSession()
        HandledErrorRecorder.setSession(id)
        return id
    }

    /// Records a handled error: on disk (errors/) before returning, so a crash right after it
    /// loses nothing, and sent by the next delivery as a record at severity ERROR with
    /// exception.type (the Swift type), exception.message, exception.stacktrace (this thread's
    /// stack, starting at the caller), apsio.async_stacktrace (its Swift async callers, when
    /// called from async code) and apsio.error.fingerprint when given.
    /// - Returns: false when it was not written (before ``start(_:)``, errors/ full, disk error).
    @inline(never) @discardableResult
    public static func record(error: any Error, fingerprint: String? = nil) -> Bool {
        let hold = FileSizeSignalHold()  // a write past ulimit -f fails; it never ends the app
        defer { hold.release() }
        var frames = [UInt64](repeating: 0, count: Int(AFT_ERROR_MAX_FRAMES))
        // skip 1: this function; frame 0 is then the caller's return address.
        let n = aft_current_stack(&frames, UInt32(frames.count), 1)
        frames.removeSubrange(Int(n)...)
        // Its Swift async callers, when called from async code: not on the stack.
        var links = [aft_swift_async_link](repeating: aft_swift_async_link(), count: Int(AFT_SWIFT_ASYNC_MAX_LINKS))
        let m = aft_current_swift_async_chain(&links, UInt32(links.count))
        links.removeSubrange(Int(m)...)
        return HandledErrorRecorder.write(
            type: String(reflecting: type(of: error)),
            message: String(describing: error),
            fingerprint: fingerprint, frames: frames, swiftAsync: links)
    }
}
