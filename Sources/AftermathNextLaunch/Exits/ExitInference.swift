import CSignalShim
import Foundation

/// The rules that decide, on a later launch, whether a run that ended (its file unlocked) is
/// reported as `app.abnormal_exit`, and why. In order:
///
/// 1. Nothing when the run left a crash report (the crash wins), ended normally, was this very
///    process before an exec (same boot, pid and process start time), or when the
///    boot_id, service.version, app.build_id, os.name/os.version or kernel differ from this
///    launch's (reboot, update), or a debugger was attached (TracerPid) at some update.
/// 2. `signal`, platform: a termination signal was caught and its default action killed the run.
/// 3. `memory`, platform: an OOM-kill counter of the run's cgroup or its parent (v1
///    memory.oom_control oom_kill, v2 memory.events oom_kill / oom_group_kill) is higher now
///    than at the run's last update.
/// 4. `signal`, platform: a termination signal was caught, the app's own handler ran, and no
///    normal exit followed.
///
/// Platform reasons are reported in the foreground or not. The inferred ones below only when
/// the run was in the foreground at its last update:
/// 5. `watchdog`: the run has an unfinished hang and systemd's watchdog was armed for it
///    (WATCHDOG_USEC): the service manager kills a service that stops answering.
/// 6. `memory`: host-wide evidence near the death, which came after the run's last update
///    (about one update interval after it while the run was alive): /proc/vmstat oom_kill is
///    higher than at the last update, read by a launch within ``hostEvidenceWindowNanoseconds``
///    of it (later, the rise may be any process's kill since: an OOM kill days after the app was
///    killed by hand is not its cause); or memory pressure was high at the last update itself
///    (PSI some avg10 ≥ 40% or full ≥ 10%). The evidence text says which and when. A run
///    records vmstat's count only where its own cgroup's counter was unreadable: that one counts
///    every kernel OOM kill of the run's processes (rule 3), so beside it a rise of the host's
///    count is another process's kill.
/// 7. `anr`: the run has an unfinished hang: it was killed while not answering.
/// 8. `unknown`.
package struct ExitInference: Sendable {
    /// PSI `some avg10` at or above this (×100) is high memory pressure.
    package static let psiSomeHigh: UInt32 = 4000
    /// PSI `full avg10` at or above this (×100) is high memory pressure.
    package static let psiFullHigh: UInt32 = 1000
    /// How long after the run's last update a rise of the host's OOM-kill counter still counts.
    package static let hostEvidenceWindowNanoseconds: UInt64 = 60_000_000_000

    /// The launch judging.
    package var environment: ExitEnvironment

    package init(environment: ExitEnvironment) {
        self.environment = environment
    }

    /// Judges one ended run.
    /// - Parameters:
    ///   - crashed: a crash report of this run is in the collection.
    ///   - unfinishedHangMilliseconds: the longest unfinished hang of this run, if any.
    ///   - unfinishedHangTarget: what it was of, when not the main thread.
    package func judge(
        _ run: RunFile, crashed: Bool, unfinishedHangMilliseconds: UInt64? = nil, unfinishedHangTarget: String? = nil
    ) -> ExitVerdict {
        let of = unfinishedHangTarget.map { " of \($0)" } ?? ""
        let c = run.context
        if crashed { return .nothing("crash report") }
        if let exit = run.exit { return .nothing("clean exit (status \(exit.status))") }
        if let now = environment.bootID, !run.bootID.isEmpty, now != run.bootID {
            return .nothing("reboot (boot_id \(run.bootID) -> \(now))")
        }
        if let me = environment.process, run.info.process_start_ticks != 0,
            c.pid == me.pid, run.info.process_start_ticks == me.startTicks
        {
            return .nothing("exec: this process (pid \(me.pid), start tick \(me.startTicks)) replaced its image")
        }
        if let v = environment.serviceVersion, v != c.serviceVersion {
            return .nothing("update (service.version \(c.serviceVersion) -> \(v))")
        }
        if let b = environment.appBuildID, !c.appBuildID.isEmpty, b != c.appBuildID {
            return .nothing("update (app.build_id \(c.appBuildID) -> \(b))")
        }
        if let n = environment.osName, n != c.osName { return .nothing("OS change (\(c.osName) -> \(n))") }
        if let v = environment.osVersion, v != c.osVersion { return .nothing("OS update (\(c.osVersion) -> \(v))") }
        if let k = environment.kernelRelease, !c.kernelRelease.isEmpty, k != c.kernelRelease {
            return .nothing("kernel update (\(c.kernelRelease) -> \(k))")
        }
        if run.debuggerSeen { return .nothing("debugger attached (TracerPid \(run.live?.tracer_pid ?? 0))") }

        func report(_ reason: ExitReason, _ source: ExitSource, _ evidence: String) -> ExitVerdict {
            var context = c
            context.sessionID = run.sessionID
            return .abnormal(
                ExitReport(
                    context: context, reason: reason, source: source,
                    foreground: run.foreground, evidence: evidence,
                    timeUnixNano: run.lastSeenUnixNano,
                    previousSessionID: run.previousSessionID, screen: run.screen))
        }

        if let t = run.term, t.disposition == AFT_TERM_DEFAULT {
            return report(.signal, .platform, Self.describe(t) + ", default action")
        }
        if let memory = cgroupEvidence(run) { return report(.memory, .platform, memory) }
        if let t = run.term {
            return report(.signal, .platform, Self.describe(t) + ", app handler ran, no exit followed")
        }
        guard run.foreground else { return .nothing("background, no platform evidence") }
        if let hang = unfinishedHangMilliseconds, run.info.watchdog_usec > 0 {
            return report(
                .watchdog, .inferred,
                "unfinished hang\(of) \(hang) ms, WATCHDOG_USEC=\(run.info.watchdog_usec)")
        }
        if let memory = systemMemoryEvidence(run) { return report(.memory, .inferred, memory) }
        if let hang = unfinishedHangMilliseconds {
            return report(.anr, .inferred, "unfinished hang\(of) \(hang) ms")
        }
        return report(.unknown, .inferred, "no evidence (\(run.live?.update_count ?? 0) updates)")
    }

    /// "SIGTERM from pid 12 uid 0".
    package static func describe(_ t: aft_run_term) -> String {
        var s = SignalDescription.name(t.signal)
        if t.sender_pid >= 0 { s += " from pid \(t.sender_pid) uid \(t.sender_uid)" }
        if t.count > 1 { s += " (\(t.count) requests)" }
        return s
    }

    /// A cgroup OOM counter that rose after the run's last update.
    package func cgroupEvidence(_ run: RunFile) -> String? {
        let now = EvidenceReader.oomCounters(of: run.info)
        var last = run.info.oom_at_start
        if let live = run.live { last = live.oom }
        let lastValues = withUnsafeBytes(of: &last) { Array($0.bindMemory(to: UInt64.self)) }
        let dirs = run.cgroupDirectories
        for i in 0..<Int(AFT_OOM_USED) {
            guard let n = now[i], lastValues[i] != AFT_RUN_UNREAD, n > lastValues[i] else { continue }
            return "cgroup \(EvidenceReader.counterName(i, directories: dirs)) \(lastValues[i]) -> \(n)"
        }
        return nil
    }

    /// The system's OOM kills rose soon after the run's last update, or memory pressure was
    /// high at the last update.
    package func systemMemoryEvidence(_ run: RunFile) -> String? {
        guard let live = run.live else { return nil }
        let now = environment.boottimeNanoseconds ?? Clock.boottimeNanoseconds()
        // Same boot (CLOCK_BOOTTIME went on), and soon enough that a rise is near the death.
        let since =
            now >= live.updated_boottime_ns && live.updated_boottime_ns > 0 ? now - live.updated_boottime_ns : nil
        if let since, since <= Self.hostEvidenceWindowNanoseconds, live.vmstat_oom_kill != AFT_RUN_UNREAD,
            let kills = EvidenceReader(procRoot: environment.procRoot).vmstatOOMKills(), kills > live.vmstat_oom_kill
        {
            return
                "/proc/vmstat oom_kill \(live.vmstat_oom_kill) -> \(kills) within \(Self.seconds(since)) of the run's last update"
        }
        let some = live.psi_some_avg10_centi, full = live.psi_full_avg10_centi
        if (some != UInt32.max && some >= Self.psiSomeHigh) || (full != UInt32.max && full >= Self.psiFullHigh) {
            return
                "memory pressure at the run's last update: some avg10 \(Self.percent(some)), full avg10 \(Self.percent(full))"
        }
        return nil
    }

    /// "12.3 s".
    package static func seconds(_ ns: UInt64) -> String {
        String(format: "%.1f s", Double(ns) / 1e9)
    }

    package static func percent(_ centi: UInt32) -> String {
        centi == UInt32.max ? "n/a" : "\(centi / 100).\(String(format: "%02d", centi % 100))%"
    }
}
