import CSignalShim
import Foundation
#if canImport(Glibc)
import Glibc
#endif

extension ReportCollector {
    /// hangs/: what earlier runs' watchdogs left.
    ///
    /// - A hang of a run that ended before it finished (killed, crashed) becomes `apsio.hang`
    ///   with `apsio.hang.unfinished = true` and the duration of its last update.
    /// - A finished hang that was never acknowledged becomes a normal live record.
    /// - The running process's own hangs are left alone: its watchdog may be writing them, and
    ///   it reports them itself when they finish (``HangMonitor``). So are hangs another live
    ///   instance of the app is in: its run file is locked while it lives.
    /// - A crash of the same run is reported too (`collectCrashes` runs first); the hang gets
    ///   `apsio.hang.run_crashed = true`. Both records, see ``HangRecordMapper``.
    /// - Bad files are rejected with their reason.
    package func collectHangs(_ pass: inout Pass) {
        forEachReportFile(
            &pass, in: directory.hangs, suffix: ".hang", what: "hang", limit: limits.maxPendingHangs,
            tmpIsDead: { !hangFileInUse($0, tmp: true) },
            accept: { pass, path, file in
                // Remembered for judging runs (collectRuns), whether or not it is reported here.
                if file.kind == AFT_KIND_HANG, let context = file.context,
                    (file.liveFlags | file.flags) & UInt32(AFT_FLAG_HANG_FINISHED) == 0
                {
                    let runID = ReportContext(context).runID
                    let ms = file.liveValue ?? 0
                    if ms >= pass.unfinishedHangs[runID] ?? 0 { pass.unfinishedHangs[runID] = ms }
                    if let what = HangReport.targetDescription(file) { pass.unfinishedHangTargets[runID] = what }
                }
                let hang = try HangReport(file: file)
                if let currentRunID, hang.context.runID == currentRunID { return }
                // A live instance reports its own hangs, finished or not: its run file is locked.
                if runIsAlive(hang.context.runID) { return }
                if !hang.isFinished, hangFileInUse(path, tmp: false) { return }
                pass.reports.append(
                    PendingReport(
                        kind: .hang, path: path,
                        record: HangRecordMapper.hang(
                            hang, observedTimeUnixNano: pass.observedTimeUnixNano,
                            runCrashed: pass.crashedRuns.contains(hang.context.runID)),
                        crash: nil))
            })
    }

    /// The run's file is locked: its process is alive.
    package func runIsAlive(_ runID: UUID) -> Bool {
        let path = ReportDirectory.join(directory.runs, Hex.encode(runID.bytes) + ".run")
        return aft_run_is_locked(path) == 1
    }

    /// A hang file a live process is still writing: a `.tmp` younger than 10 s (the watchdog
    /// renames it within milliseconds), or a committed file whose watchdog holds its lock.
    private func hangFileInUse(_ path: String, tmp: Bool) -> Bool {
        if tmp {
            var st = stat()
            guard lstat(path, &st) == 0 else { return false }
            return Double(Clock.realtimeNanoseconds()) / 1e9 - Double(st.st_mtim.tv_sec) < 10
        }
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        return flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK
    }
}
