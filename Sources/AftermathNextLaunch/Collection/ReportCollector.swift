import AftermathOTLP
import CSignalShim
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Finds the reports that runs left in a reports directory, turns them into log records,
/// and deletes each file only after an exporter acknowledged its record.
package struct ReportCollector: Sendable {
    /// The directory read.
    package let directory: ReportDirectory
    /// The running process's run id: its own files are never taken for a dead run's.
    package let currentRunID: UUID?

    /// The environment dead runs are judged in: the reporting launch's release and OS, the
    /// proc and sys roots. Nil: the system's, with the release unknown.
    package var environment: ExitEnvironment?
    /// How many ended run files are kept, and for how long.
    package var limits: Limits

    /// Retention of ended run files.
    package struct Limits: Sendable {
        /// Ended run files kept at most; older ones are removed first.
        package var maxRunFiles = 64
        /// Ended run files older than this are removed, in seconds.
        package var maxRunAgeSeconds: Double = 7 * 24 * 3600
        package init(maxRunFiles: Int = 64, maxRunAgeSeconds: Double = 7 * 24 * 3600) {
            self.maxRunFiles = maxRunFiles
            self.maxRunAgeSeconds = maxRunAgeSeconds
        }
    }

    /// A collector over directory.
    package init(directory: ReportDirectory, currentRunID: UUID? = nil, environment: ExitEnvironment? = nil,
                 limits: Limits = Limits()) {
        self.directory = directory
        self.currentRunID = currentRunID
        self.environment = environment
        self.limits = limits
    }

    /// What one collection found.
    package struct Collection: Sendable {
        /// Reports ready to export, oldest first.
        package var reports: [PendingReport]
        /// Files that were not reported, with the reason.
        package var rejected: [RejectedFile]
    }

    /// What one delivery did.
    package struct Delivery: Sendable {
        /// Records the exporter acknowledged (their files are deleted).
        package var exported: Int
        /// Files that were not reported, with the reason.
        package var rejected: [RejectedFile]
        /// Why the exporter refused the batch, when it did (the files are kept).
        package var exportError: String?
    }

    /// Reads every pending report. With moveRejected, bad files are moved to rejected/ with a
    /// reason; without it (the debug command's dump) nothing on disk changes.
    package func collect(moveRejected: Bool = true) -> Collection {
        var pass = Pass(moveRejected: moveRejected, observedTimeUnixNano: Clock.realtimeNanoseconds())
        // Order matters: later passes may look at what earlier ones found (a crash of a run
        // wins over an inferred abnormal exit of the same run).
        collectCrashes(&pass)
        collectHangs(&pass)
        collectErrors(&pass)
        collectRuns(&pass)
        pass.reports.sort { $0.record.timeUnixNano < $1.record.timeUnixNano }
        return Collection(reports: pass.reports, rejected: pass.rejected)
    }

    /// The state of one collection, shared by the passes over each directory.
    package struct Pass {
        package let moveRejected: Bool
        package let observedTimeUnixNano: UInt64
        package var reports: [PendingReport] = []
        package var rejected: [RejectedFile] = []
        /// Runs that left a crash report in this collection.
        package var crashedRuns: Set<UUID> = []
    }

    /// crashes/: committed crash files, and the .tmp of a handler that died while writing.
    package func collectCrashes(_ pass: inout Pass) {
        let moveRejected = pass.moveRejected
        forEachReportFile(&pass, in: directory.crashes, suffix: ".crash", what: "crash", tmpIsDead: { path in
            switch reserveState(path) {
            case .heldByLiveRun: return false
            case .emptyOfDeadRun:
                if moveRejected { unlink(path) } // that run ended without crashing
                return false
            case .writtenByDeadRun: return true
            }
        }, accept: { pass, path, file in
            let crash = try file.crashReport()
            pass.crashedRuns.insert(crash.context.runID)
            pass.reports.append(PendingReport(
                kind: .crash, path: path,
                record: RecordMapper.crash(crash, observedTimeUnixNano: pass.observedTimeUnixNano,
                                           previousSessionID: previousSession(of: crash.context)),
                crash: crash))
        })
    }

    /// The walk every report directory shares: the oldest files beyond the retention limit
    /// rejected; `*<suffix>` is a committed file; `*<suffix>.tmp` a writer's leftover, decoded
    /// (salvaged) only when tmpIsDead says its writer is gone; anything else is rejected. A
    /// decoded file goes to accept; what it throws sets the file aside with the reason.
    package func forEachReportFile(_ pass: inout Pass, in dir: String, suffix: String, what: String,
                           tmpIsDead: (String) -> Bool,
                           accept: (inout Pass, String, ReportFile) throws -> Void) {
        if pass.moveRejected { enforceRetention(&pass, in: dir, suffix: suffix, what: what) }
        for name in listing(dir) {
            let path = (dir as NSString).appendingPathComponent(name)
            let salvage: Bool
            if name.hasSuffix(suffix) {
                salvage = false
            } else if name.hasSuffix(suffix + ".tmp") {
                guard tmpIsDead(path) else { continue }
                salvage = true
            } else {
                let folder = (dir as NSString).lastPathComponent
                pass.rejected.append(reject(path, reason: "unexpected file in \(folder)/", moveRejected: pass.moveRejected))
                continue
            }
            do {
                try accept(&pass, path, try ReportFile.decode(FileReader.read(path), salvage: salvage))
            } catch {
                let reason = (error as? ReportFileError)?.description ?? String(describing: error)
                pass.rejected.append(reject(path, reason: reason, moveRejected: pass.moveRejected))
            }
        }
    }

    /// Records per exported batch: a refused batch holds back no more than this many.
    package static let batchSize = 50

    /// One delivery at a time in this process.
    private static let inProcess = Mutex<Int>(0)

    /// Collects, then exports in batches of at most ``batchSize`` records, deleting the files of
    /// each acknowledged batch. A batch that fails keeps its files for the next attempt; an
    /// unavailable receiver (``ExportError/Kind/unavailable``: unreachable, out of time) stops
    /// the batches after it too; a batch refused for good goes to rejected/ with the reason. One delivery at a time per reports directory, across
    /// processes too (a lock file), so two instances never send the same report twice.
    package func deliver(to exporter: any LogExporter, resource: Resource) -> Delivery {
        Self.inProcess.withLock { _ in
            let lockPath = (directory.root as NSString).appendingPathComponent(".deliver.lock")
            let lock = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
            guard lock >= 0 else {
                return Delivery(exported: 0, rejected: [], exportError: "cannot open \(lockPath): \(String(cString: strerror(errno)))")
            }
            defer { close(lock) }
            guard flock(lock, LOCK_EX | LOCK_NB) == 0 else {
                return Delivery(exported: 0, rejected: [], exportError: "another process is delivering these reports")
            }
            let collection = collect(moveRejected: true)
            var rejected = collection.rejected
            var exported = 0
            var firstError: String?
            var start = 0
            batches: while start < collection.reports.count {
                let chunk = Array(collection.reports[start..<min(start + Self.batchSize, collection.reports.count)])
                start += chunk.count
                let batch = LogBatch(resource: resource, scopeName: SDK.scopeName,
                                     scopeVersion: SDK.version, records: chunk.map(\.record))
                do {
                    try exporter.export(batch)
                } catch {
                    firstError = firstError ?? String(describing: error)
                    switch (error as? ExportError)?.kind ?? .failed {
                    case .failed: continue batches
                    case .unavailable: break batches
                    case .rejectedByCollector(let message):
                        // Resending cannot succeed: kept aside with the collector's word.
                        for report in chunk {
                            rejected.append(reject(report.path, reason: "refused by the collector: \(message)", moveRejected: true))
                        }
                        continue batches
                    }
                }
                for report in chunk { unlink(report.path) }
                exported += chunk.count
            }
            return Delivery(exported: exported, rejected: rejected, exportError: firstError)
        }
    }

    /// Names in dir, sorted; hidden files ignored.
    package func listing(_ dir: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? [])
            .filter { !$0.hasPrefix(".") }
            .sorted()
    }

    /// Pending files of one kind kept at most: a crash or hang loop with no exporter reachable
    /// must not fill the disk. The oldest beyond it are rejected with the reason.
    package static let maximumPendingCrashes = 64

    package func enforceRetention(_ pass: inout Pass, in dir: String, suffix: String, what: String) {
        let names = listing(dir).filter { $0.hasSuffix(suffix) }
        guard names.count > Self.maximumPendingCrashes else { return }
        let dated = names.map { name -> (String, Int) in
            let path = (dir as NSString).appendingPathComponent(name)
            var st = stat()
            return (path, lstat(path, &st) == 0 ? Int(st.st_mtim.tv_sec) : 0)
        }.sorted { $0.1 < $1.1 }
        for (path, _) in dated.prefix(names.count - Self.maximumPendingCrashes) {
            pass.rejected.append(reject(path, reason: "retention: more than \(Self.maximumPendingCrashes) pending \(what) reports, the oldest rejected", moveRejected: true))
        }
    }

    package enum ReserveState { case heldByLiveRun, emptyOfDeadRun, writtenByDeadRun }

    /// Every run reserves its crash file at start and holds a lock on it while alive. A
    /// locked reserve belongs to a running process; an empty unlocked one to a run that did
    /// not crash; a non-empty unlocked one to a handler that died while writing.
    package func reserveState(_ path: String) -> ReserveState {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return .writtenByDeadRun } // decoding will say why
        defer { close(fd) }
        if flock(fd, LOCK_EX | LOCK_NB) != 0 { return .heldByLiveRun }
        var st = stat()
        guard fstat(fd, &st) == 0 else { return .writtenByDeadRun }
        return st.st_size == 0 ? .emptyOfDeadRun : .writtenByDeadRun
    }

    /// Moves a bad file to rejected/ with a `.reason` file beside it (at most 64 kept).
    package func reject(_ path: String, reason: String, moveRejected: Bool) -> RejectedFile {
        guard moveRejected else { return RejectedFile(path: path, reason: reason, movedTo: nil) }
        let name = (path as NSString).lastPathComponent
        var target = (directory.rejected as NSString).appendingPathComponent(name)
        var n = 1
        while FileManager.default.fileExists(atPath: target) || (try? FileManager.default.destinationOfSymbolicLink(atPath: target)) != nil {
            target = (directory.rejected as NSString).appendingPathComponent("\(name).\(n)")
            n += 1
        }
        guard rename(path, target) == 0 else {
            return RejectedFile(path: path, reason: reason + " (could not move aside: \(String(cString: strerror(errno))))", movedTo: nil)
        }
        try? Data((reason + "\n").utf8).write(to: URL(fileURLWithPath: target + ".reason"))
        trimRejected()
        return RejectedFile(path: path, reason: reason, movedTo: target)
    }

    private func trimRejected(keeping limit: Int = 64) {
        let fm = FileManager.default
        let names = listing(directory.rejected).filter { !$0.hasSuffix(".reason") }
        guard names.count > limit else { return }
        let dated = names.map { name -> (String, Date) in
            let p = (directory.rejected as NSString).appendingPathComponent(name)
            let date = (try? fm.attributesOfItem(atPath: p)[.modificationDate] as? Date) ?? .distantPast
            return (p, date)
        }.sorted { $0.1 < $1.1 }
        for (p, _) in dated.prefix(names.count - limit) {
            try? fm.removeItem(atPath: p)
            try? fm.removeItem(atPath: p + ".reason")
        }
    }
}
