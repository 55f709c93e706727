import Foundation
#if canImport(Glibc)
import Glibc
#endif

extension ReportCollector {
    /// errors/: handled errors. A file with its final name is whole (written to .tmp, then
    /// renamed). A .tmp is left alone for a minute (its writer may still rename it); after that
    /// it is reported if it decodes (the writer died between write and rename), else removed.
    package func collectErrors(_ pass: inout Pass) {
        for (entry, isTemporary) in admitted(
            &pass, in: directory.errors, suffixes: [".error", ".error.tmp"],
            what: "error", limit: limits.maxPendingErrors)
        {
            let path = ReportDirectory.join(directory.errors, entry.name)
            // A .tmp younger than a minute may be renamed into place by its writer any moment.
            if isTemporary {
                if pass.now - entry.modified <= 60 { continue }
                if tooOld(&pass, path, entry) { continue }
            }
            do {
                let error = try HandledErrorFile.decode(
                    FileReader.read(path, maximumSize: HandledErrorFile.maximumSize))
                pass.reports.append(
                    PendingReport(
                        kind: .error, path: path,
                        record: error.record(observedTimeUnixNano: pass.observedTimeUnixNano),
                        crash: nil))
            } catch {
                if isTemporary {
                    if pass.moveRejected { unlink(path) }
                    continue
                }
                pass.rejected.append(reject(path, reason: error.description, moveRejected: pass.moveRejected))
            }
        }
    }

    /// Seconds since path was last modified (0 when it cannot be read).
    package static func secondsSinceModified(_ path: String) -> Double {
        var st = stat()
        guard lstat(path, &st) == 0 else { return 0 }
        return Double(Clock.realtimeNanoseconds()) / 1e9
            - (Double(st.st_mtim.tv_sec) + Double(st.st_mtim.tv_nsec) / 1e9)
    }
}
