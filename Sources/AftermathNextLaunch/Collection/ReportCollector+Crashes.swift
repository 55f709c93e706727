import AftermathOTLP
import CSignalShim
import Foundation
#if canImport(Glibc)
import Glibc
#endif

extension ReportCollector {
    /// crashes/: committed crash files, and the .tmp of a handler that died while writing.
    package func collectCrashes(_ pass: inout Pass) {
        let moveRejected = pass.moveRejected
        forEachReportFile(
            &pass, in: directory.crashes, suffix: ".crash", what: "crash",
            limit: limits.maxPendingCrashes,
            tmpIsDead: { path in
                switch Self.reserveState(path) {
                case .heldByLiveRun: return false
                case .committedByLiveRun: return true
                case .emptyOfDeadRun:
                    if moveRejected { unlink(path) }  // that run ended without crashing
                    return false
                case .writtenByDeadRun: return true
                }
            },
            accept: { pass, path, file in
                let crash = try file.crashReport()
                // This process's own crash, written by another of its threads while it delivers:
                // the process is dying of it (or withdraws it); the next launch sends it, once.
                if let currentRunID, crash.context.runID == currentRunID { return }
                // The same file under a second name (the link a naming left behind where the
                // file system has no one-step rename without replacing, and its process died
                // before removing the old name): sent once, the other name removed.
                var st = stat()
                if lstat(path, &st) == 0, st.st_nlink > 1, !pass.linkedCrashFiles.insert(UInt64(st.st_ino)).inserted {
                    if moveRejected { unlink(path) }
                    return
                }
                let path = moveRejected ? Self.named(path, file, crash.context.reportID) : path
                pass.crashedRuns.insert(crash.context.runID)
                pass.reports.append(
                    PendingReport(
                        kind: .crash, path: path,
                        record: RecordMapper.crash(
                            crash, observedTimeUnixNano: pass.observedTimeUnixNano,
                            previousSessionID: previousSession(of: crash.context)),
                        crash: crash))
            })
    }

    /// A handler's reserve, committed in place under the name it had while its run lived, named
    /// as a report by its id (a rename the handler leaves to this launch); its path after that.
    static func named(_ path: String, _ file: ReportFile, _ id: UUID) -> String {
        guard file.committed, path.hasSuffix(".crash.tmp") else { return path }
        let named = ReportDirectory.join(ReportDirectory.parent(of: path), id.fileStem + ".crash")
        return StoreFiles.moveNoReplace(path, named) == 0 ? named : path
    }
}
