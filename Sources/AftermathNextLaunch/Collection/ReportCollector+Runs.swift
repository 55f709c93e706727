import AftermathOTLP
import CSignalShim
import Foundation
#if canImport(Glibc)
import Glibc
#endif

extension ReportCollector {
    /// runs/: judges every run that ended (its file unlocked) with ``ExitInference``, after the
    /// crash pass, so a crash report of a run wins over an inferred exit. A locked file is a
    /// live run (another instance, or this one) and is never judged. A judged run with nothing
    /// to report is renamed to .ended; a run with an abnormal exit stays until the record is
    /// acknowledged. Bounds: entries that are not regular files and unexpected names are
    /// rejected; dead runs older than the report age limit, and the oldest beyond the pending
    /// limit, are rejected unjudged. Retention: half-written .run.tmp files of dead writers are
    /// removed, then ended runs older than the run age limit or beyond the count limit (down
    /// to three quarters of it; their ages are read only then, and at one launch in 16).
    /// Whether path is the run file a launch made ahead for the next one: its name, unwritten
    /// (empty, or a recycled run file whose header is zero).
    static func isUnwrittenSpare(_ path: String, name: String) -> Bool {
        name == AFT_RUN_SPARE_FILE_NAME && aft_run_spare_unwritten(AT_FDCWD, path) == 1
    }

    package func collectRuns(_ pass: inout Pass) {
        let judge = ExitInference(environment: environment ?? .system())
        let limits = (count: self.limits.maxRunFiles, age: self.limits.maxRunAgeSeconds)
        let hangs = pass.unfinishedHangs
        var ended: [String] = []
        var retained = 0
        // A live run's file (locked) is never rejected for its age or the count.
        let runs = directory.runs
        let isLive: (StoreFiles.Entry) -> Bool = { entry in
            aft_run_is_locked(ReportDirectory.join(runs, entry.name)) == 1
        }
        for (entry, leftover) in admitted(
            &pass, in: runs, suffixes: [".run", ".run.tmp", ".ended"], what: "run",
            limit: self.limits.maxPendingRuns, keep: isLive,
            statting: { !$0.hasSuffix(".ended") })  // their ages are read only for retention
        {
            let name = entry.name
            let path = ReportDirectory.join(runs, name)
            if leftover {
                if name.hasSuffix(".ended") {
                    ended.append(path)
                } else if pass.moveRejected, aft_run_is_locked(path) == 0, !Self.isUnwrittenSpare(path, name: name) {
                    // A writer holds its .tmp locked while it writes it: unlocked means it died.
                    // The next launch's spare (unwritten, made ahead by a run) is kept for it.
                    unlink(path)
                }
                continue
            }
            if aft_run_is_locked(path) == 1 {
                retained += 1
                continue
            }  // alive
            let run: RunFile
            do {
                run = try RunFile.decode(FileReader.read(path, maximumSize: RunFile.maximumSize))
            } catch {
                pass.rejected.append(reject(path, reason: error.description, moveRejected: pass.moveRejected))
                continue
            }
            if run.runID == currentRunID {
                retained += 1
                continue
            }
            // However old (within the report age limit), a dead run is judged once (an app
            // opened weekly still learns how its last run ended); the run age limit applies to
            // judged (.ended) runs.
            tagWatchdogCrash(&pass, run: run)
            let verdict = judge.judge(
                run, crashed: pass.crashedRuns.contains(run.runID),
                unfinishedHangMilliseconds: hangs[run.runID],
                unfinishedHangTarget: pass.unfinishedHangTargets[run.runID])
            switch verdict {
            case .abnormal(let report):
                retained += 1
                pass.reports.append(
                    PendingReport(
                        kind: .abnormalExit, path: path,
                        record: report.record(observedTimeUnixNano: pass.observedTimeUnixNano), crash: nil))
            case .nothing:
                guard pass.moveRejected else { continue }
                let target = String(path.dropLast(".run".count)) + ".ended"  // judged: .run
                if rename(path, target) == 0 { ended.append(target) }
            }
        }
        guard pass.moveRejected else { return }
        // Their ages (one lstat each) only when some may go: over the count, or, at one launch
        // in 16, for the age limit. Over the count they go down to three quarters of it, so that
        // the next launches, each ending one more run, list them without reading their ages.
        var total = retained + ended.count
        let agePass = currentRunID.map { $0.uuid.0 & 15 == 0 } ?? true
        guard total > limits.count || agePass else { return }
        let keep = total > limits.count ? limits.count - limits.count / 4 : limits.count
        let oldestFirst = StoreFiles.stablySorted(ended.map { (path: $0, age: Self.secondsSinceModified($0)) }) {
            $0.age > $1.age
        }
        for file in oldestFirst where (file.age > limits.age || total > keep) && pass.removalBudget > 0 {
            pass.removalBudget -= 1
            if unlink(file.path) == 0 { total -= 1 }
        }
    }

    /// session.previous_id of a report from the run's file (judged or not): the run's last
    /// session and the one before it, taken when the report is of that last session. A crash
    /// ends its run, so its session is the run's last. nil without a readable run file.
    package func previousSession(of context: ReportContext) -> UUID? {
        let base = ReportDirectory.join(directory.runs, Hex.encode(context.runID.bytes))
        for suffix in [".run", ".ended"] {
            guard let bytes = try? FileReader.read(base + suffix, maximumSize: RunFile.maximumSize),
                let run = try? RunFile.decode(bytes)
            else { continue }
            return run.sessionID == context.sessionID ? run.previousSessionID : nil
        }
        return nil
    }

    /// systemd's watchdog: a crash of a run with WATCHDOG_USEC set, SIGABRT sent by pid 1 or
    /// the run's parent (its service manager), keeps its app.crash record (a crash report wins)
    /// and gains apsio.crash.termination_category = watchdog.
    package func tagWatchdogCrash(_ pass: inout Pass, run: RunFile) {
        guard run.info.watchdog_usec > 0 else { return }
        for i in pass.reports.indices {
            guard pass.reports[i].kind == .crash, let crash = pass.reports[i].crash,
                crash.context.runID == run.runID, crash.signal == SIGABRT,
                let sender = crash.senderPID, sender == 1 || sender == run.info.parent_pid,
                pass.reports[i].record[attribute: "apsio.crash.termination_category"] == nil
            else { continue }
            pass.reports[i].record.attributes.append(Attribute("apsio.crash.termination_category", "watchdog"))
        }
    }
}
