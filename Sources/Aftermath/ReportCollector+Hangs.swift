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
///   instance of the app is in: its watchdog holds a lock on the file until the hang ends.
    /// - A crash of the same run is reported too (`collectCrashes` runs first); the hang gets
    ///   `apsio.hang.run_crashed = true`. Both records, see ``HangRecordMapper``.
    /// - Bad files are set aside with their reason.
    func collectHangs(_ pass: inout Pass) {
        if pass.quarantine { enforceRetention(&pass, in: directory.hangs, suffix: ".hang", what: "hang") }
        for name in listing(directory.hangs) {
            let path = (directory.hangs as NSString).appendingPathComponent(name)
            let salvage: Bool
            if name.hasSuffix(".hang") {
                salvage = false
            } else if name.hasSuffix(".hang.tmp") {
                if hangFileInUse(path, tmp: true) { continue }
                salvage = true
            } else {
                pass.skipped.append(setAside(path, reason: "unexpected file in hangs/", quarantine: pass.quarantine))
                continue
            }
            do {
                let file = try ReportFile.decode(FileReader.read(path), salvage: salvage)
                let hang = try HangReport(file: file)
                if let currentRunID, hang.context.runID == currentRunID { continue }
                // A live instance reports its own hangs, finished or not: its run file is locked.
                if runIsAlive(hang.context.runID) { continue }
                if !hang.isFinished, hangFileInUse(path, tmp: false) { continue }
                pass.reports.append(PendingReport(
                    kind: .hang, path: path,
                    record: HangRecordMapper.hang(hang, observedTimeUnixNano: pass.observedTimeUnixNano,
                                                  runCrashed: pass.crashedRuns.contains(hang.context.runID)),
                    crash: nil))
            } catch {
                pass.skipped.append(setAside(path, reason: error.description, quarantine: pass.quarantine))
            }
        }
    }

    /// The run's file is locked: its process is alive.
    func runIsAlive(_ runID: UUID) -> Bool {
        let path = (directory.runs as NSString).appendingPathComponent(Hex.encode(runID.bytes) + ".run")
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
