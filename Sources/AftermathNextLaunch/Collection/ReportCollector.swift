import AftermathOTLP
import CSignalShim
import Foundation
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
    package var environment: ExitEnvironment? {
        get { environmentBox?.value }
        set { environmentBox = newValue.map(EnvironmentBox.init) }
    }
    /// The environment by reference: an optional reference is copied and destroyed with a
    /// retain and a release, where an optional ExitEnvironment has the runtime build its type's
    /// metadata by name, on every launch's delivery thread.
    private var environmentBox: EnvironmentBox?
    private final class EnvironmentBox: Sendable {
        let value: ExitEnvironment
        init(_ value: ExitEnvironment) { self.value = value }
    }
    /// How many pending files of each kind a launch reads, how old they may be, and how many
    /// ended run files are kept.
    package var limits: Limits
    /// Makes a crash's minidump (empty: none); nil, or no attachment exporter at delivery: crashes
    /// get no attachment.
    package var minidump: (@Sendable (CrashReport) -> [UInt8])?

    /// Bounds on what one collection reads. Files beyond them are rejected with the reason
    /// before any is decoded, so a launch's delivery stays bounded in time and memory however
    /// many files earlier runs (or anyone else) left.
    package struct Limits: Sendable {
        /// Ended run files kept at most; older ones are removed first.
        package var maxRunFiles = 64
        /// Ended run files older than this are removed, in seconds.
        package var maxRunAgeSeconds: Double = 7 * 24 * 3600
        /// Pending crashes, hangs, errors and dead runs older than this (last modified) are
        /// rejected, in seconds (default 30 days).
        package var maxReportAgeSeconds: Double = 30 * 24 * 3600
        /// Pending crash files read at most; the oldest beyond it are rejected.
        package var maxPendingCrashes = 64
        /// Pending hang files read at most.
        package var maxPendingHangs = 64
        /// Pending handled errors read at most.
        package var maxPendingErrors = 256
        /// Dead, unjudged run files read at most.
        package var maxPendingRuns = 64
        /// Files set aside or removed for a limit (age, count, not a regular file, unexpected)
        /// in one collection at most; the rest wait for later launches. Removing a file that
        /// is on disk costs a journal write (about 2.5 ms each measured here on a busy virtual
        /// disk): ten thousand stale files are cleared over several launches, not in one.
        package var maxRemovalsPerCollection = 512
        /// Pending attachments kept at most; the oldest beyond are deleted.
        package var maxPendingAttachments = 64
        /// Pending attachments older than this are deleted, in seconds (default 365 days, as
        /// Crashpad's database prunes).
        package var maxAttachmentAgeSeconds: Double = 365 * 24 * 3600
        /// Bytes of pending attachments kept at most, the newest first (default 128 MiB, as
        /// Crashpad's database prunes).
        package var maxAttachmentBytes = 128 << 20
        /// An attachment larger than this is not kept (default 32 MiB).
        package var maxAttachmentFileBytes = 32 << 20
        package init(
            maxRunFiles: Int = 64, maxRunAgeSeconds: Double = 7 * 24 * 3600,
            maxReportAgeSeconds: Double = 30 * 24 * 3600
        ) {
            self.maxRunFiles = maxRunFiles
            self.maxRunAgeSeconds = maxRunAgeSeconds
            self.maxReportAgeSeconds = maxReportAgeSeconds
        }
    }

    /// A collector over directory.
    package init(
        directory: ReportDirectory, currentRunID: UUID? = nil, environment: ExitEnvironment? = nil,
        limits: Limits = Limits()
    ) {
        self.directory = directory
        self.currentRunID = currentRunID
        self.environmentBox = environment.map(EnvironmentBox.init)
        self.limits = limits
    }

    /// What one collection found.
    package struct Collection: Sendable {
        /// Reports ready to export, oldest first.
        package var reports: [PendingReport]
        /// Files that were not reported, with the reason.
        package var rejected: [RejectedFile]
    }

    /// Reads every pending report. With moveRejected, bad files are moved to rejected/ with a
    /// reason; without it (the debug command's dump) nothing on disk changes.
    package func collect(moveRejected: Bool = true) -> Collection {
        var pass = Pass(moveRejected: moveRejected, observedTimeUnixNano: Clock.realtimeNanoseconds())
        if moveRejected { pass.removalBudget = limits.maxRemovalsPerCollection }
        // Order matters: later passes may look at what earlier ones found (a crash of a run
        // wins over an inferred abnormal exit of the same run).
        collectCrashes(&pass)
        collectHangs(&pass)
        collectErrors(&pass)
        collectRuns(&pass)
        if moveRejected, pass.rejected.contains(where: { $0.movedTo != nil }) { trimRejected() }
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
        /// The inodes of the crash files with more than one name this collection has taken.
        package var linkedCrashFiles: Set<UInt64> = []
        /// The longest unfinished hang of each run found in hangs/ (ms until its last update).
        package var unfinishedHangs: [UUID: UInt64] = [:]
        /// What the longest unfinished hang of a run was of, when not the main thread
        /// ("event loop loop-0, thread NIO-ELT-0-#0").
        package var unfinishedHangTargets: [UUID: String] = [:]
        /// The time the collection started, seconds since the epoch (for age limits).
        package let now = Double(Clock.realtimeNanoseconds()) / 1e9
        /// Files this collection may still set aside or remove for a limit.
        package var removalBudget = Int.max
    }

    /// The walk every report directory shares. Without opening anything: non-regular entries
    /// and unexpected names are rejected, then committed files older than the age limit, then
    /// the oldest beyond the count limit. Then `*<suffix>` is a committed file; `*<suffix>.tmp`
    /// a writer's leftover, decoded (salvaged) only when tmpIsDead says its writer is gone.
    /// A decoded file goes to accept; what it throws sets the file aside with the reason.
    package func forEachReportFile(
        _ pass: inout Pass, in dir: String, suffix: String, what: String,
        limit: Int,
        tmpIsDead: (String) -> Bool,
        accept: (inout Pass, String, ReportFile) throws -> Void
    ) {
        for (entry, salvage) in admitted(&pass, in: dir, suffixes: [suffix, suffix + ".tmp"], what: what, limit: limit)
        {
            let path = ReportDirectory.join(dir, entry.name)
            if salvage {
                guard tmpIsDead(path) else { continue }
                guard !tooOld(&pass, path, entry) else { continue }
            }
            do {
                try accept(&pass, path, try ReportFile.decode(FileReader.read(path), salvage: salvage))
            } catch {
                let reason = (error as? ReportFileError)?.description ?? String(describing: error)
                pass.rejected.append(reject(path, reason: reason, moveRejected: pass.moveRejected))
            }
        }
    }

    /// The entries of dir worth opening, each with whether it is a leftover (the second
    /// suffix). Rejected with the reason, in this order and without opening them: entries that
    /// are not regular files, names without one of the suffixes, committed files (first suffix)
    /// older than the age limit, and the oldest committed files beyond limit. Leftovers are
    /// returned as they are: whether their writer lives decides what they are.
    package func admitted(
        _ pass: inout Pass, in dir: String, suffixes: [String], what: String, limit: Int,
        keep: (StoreFiles.Entry) -> Bool = { _ in false },
        statting: (String) -> Bool = { _ in true }
    ) -> [(StoreFiles.Entry, Bool)] {
        var committed: [StoreFiles.Entry] = []
        var leftovers: [StoreFiles.Entry] = []
        var old: [StoreFiles.Entry] = []
        var bad: [(entry: StoreFiles.Entry, reason: String)] = []
        for entry in StoreFiles.entries(dir, statting: statting) {
            guard entry.isRegular else {
                bad.append((entry, ReportFileError.notARegularFile(kind: entry.typeDescription).description))
                continue
            }
            if entry.name.hasSuffix(suffixes[0]) {
                if pass.now - entry.modified > limits.maxReportAgeSeconds, !keep(entry) {
                    old.append(entry)
                } else {
                    committed.append(entry)
                }
            } else if suffixes.dropFirst().contains(where: { entry.name.hasSuffix($0) }) {
                leftovers.append(entry)
            } else {
                bad.append((entry, "unexpected file in \((dir as NSString).lastPathComponent)/"))
            }
        }
        bad.sort { ($0.entry.modified, $0.entry.name) < ($1.entry.modified, $1.entry.name) }
        let reasons = Dictionary(bad.map { ($0.entry.name, $0.reason) }, uniquingKeysWith: { a, _ in a })
        rejectMany(&pass, in: dir, bad.map(\.entry)) { reasons[$0.name] ?? "" }
        let now = pass.now, maxAge = limits.maxReportAgeSeconds
        rejectMany(&pass, in: dir, old.sorted { ($0.modified, $0.name) < ($1.modified, $1.name) }) { entry in
            "older than \(Self.describeAge(maxAge)) (\(Self.describeAge(now - entry.modified)))"
        }
        if committed.count > limit {
            // Oldest first; files a live writer holds (keep) are never rejected for the count.
            let byAge = committed.enumerated().sorted {
                ($0.element.modified, $0.offset) < ($1.element.modified, $1.offset)
            }
            var excess = committed.count - limit
            var dropped = Set<Int>()
            var excessEntries: [StoreFiles.Entry] = []
            for (index, entry) in byAge where excess > 0 && !keep(entry) {
                excessEntries.append(entry)
                dropped.insert(index)
                excess -= 1
            }
            rejectMany(&pass, in: dir, excessEntries) { _ in
                "retention: more than \(limit) pending \(what) files, the oldest rejected"
            }
            committed = committed.enumerated().filter { !dropped.contains($0.offset) }.map(\.element)
        }
        return committed.map { ($0, false) } + leftovers.map { ($0, true) }
    }

    /// Rejects entries (oldest first) for a policy reason, within the collection's removal
    /// budget (the oldest first; the rest wait for a later launch, still unread). rejected/
    /// keeps only the newest ``maximumRejected`` files, so of the entries handled only the
    /// newest that many are moved there; older ones are deleted at once instead of being
    /// moved, given a reason file and trimmed (one unlink instead of six calls).
    package func rejectMany(
        _ pass: inout Pass, in dir: String, _ all: [StoreFiles.Entry],
        reason: (StoreFiles.Entry) -> String
    ) {
        let entries = all.prefix(max(0, pass.removalBudget))
        if pass.moveRejected { pass.removalBudget -= entries.count }
        let deleted = max(0, entries.count - Self.maximumRejected)
        for (i, entry) in entries.enumerated() {
            let path = ReportDirectory.join(dir, entry.name)
            if i < deleted, pass.moveRejected {
                let why = reason(entry)
                if unlink(path) == 0 {
                    pass.rejected.append(
                        RejectedFile(
                            path: path, reason: why + " (deleted: rejected/ keeps the newest \(Self.maximumRejected))",
                            movedTo: nil))
                } else {
                    pass.rejected.append(
                        RejectedFile(
                            path: path, reason: why + " (could not delete: \(String(cString: strerror(errno))))",
                            movedTo: nil))
                }
            } else {
                pass.rejected.append(reject(path, reason: reason(entry), moveRejected: pass.moveRejected))
            }
        }
    }

    /// Rejects the file when it is older than the age limit; true when it did.
    package func tooOld(_ pass: inout Pass, _ path: String, _ entry: StoreFiles.Entry) -> Bool {
        let age = pass.now - entry.modified
        guard age > limits.maxReportAgeSeconds else { return false }
        pass.rejected.append(
            reject(
                path, reason: "older than \(Self.describeAge(limits.maxReportAgeSeconds)) (\(Self.describeAge(age)))",
                moveRejected: pass.moveRejected))
        return true
    }

    /// "2 days", "3 hours", "40 seconds".
    package static func describeAge(_ seconds: Double) -> String {
        let s = Int(seconds.rounded(.down))
        if s >= 2 * 86400 { return "\(s / 86400) days" }
        if s >= 2 * 3600 { return "\(s / 3600) hours" }
        if s >= 120 { return "\(s / 60) minutes" }
        return "\(s) seconds"
    }

    /// Names in dir, sorted; hidden files ignored.
    package func listing(_ dir: String) -> [String] {
        StoreFiles.entries(dir).map(\.name)
    }

    package enum ReserveState { case heldByLiveRun, committedByLiveRun, emptyOfDeadRun, writtenByDeadRun }

    /// Every run reserves its crash file at start and holds a lock on it while alive. A
    /// locked reserve belongs to a running process (this one too: flock locks taken through
    /// two opens conflict within a process), and is a report already where its header is
    /// committed (the handler commits in place; the process is dying, or a child it made
    /// without exec still shares the descriptor); an unlocked one that is empty, or sized at
    /// start but with its header still zero, to a run that did not crash (every writer writes
    /// the header first); any other unlocked one to a handler that died while writing, or wrote.
    package static func reserveState(_ path: String) -> ReserveState {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return .writtenByDeadRun }  // decoding will say why
        defer { close(fd) }
        if flock(fd, LOCK_EX | LOCK_NB) != 0 {
            return FileHeader.isCommitted(fd: fd) ? .committedByLiveRun : .heldByLiveRun
        }
        var st = stat()
        guard fstat(fd, &st) == 0 else { return .writtenByDeadRun }
        if st.st_size == 0 { return .emptyOfDeadRun }
        let headerSize = MemoryLayout<aft_file_header>.size
        guard st.st_size <= off_t(AFT_RESERVE_SIZED_MAX), st.st_size >= off_t(headerSize) else {
            return .writtenByDeadRun
        }
        var header = [UInt8](repeating: 1, count: headerSize)
        let got = header.withUnsafeMutableBytes { pread(fd, $0.baseAddress, headerSize, 0) }
        return got == headerSize && header.allSatisfy({ $0 == 0 }) ? .emptyOfDeadRun : .writtenByDeadRun
    }

    /// Rejected files kept in rejected/ at most (each with its reason).
    package static let maximumRejected = 64

    /// Moves a bad file to rejected/ with a `.reason` file beside it. Never replaces or follows
    /// anything already there: the file gets a free name (`name`, `name.1`, ...) and the reason
    /// is created new, 0600. rejected/ is trimmed once per collection, not per file.
    package func reject(_ path: String, reason: String, moveRejected: Bool) -> RejectedFile {
        guard moveRejected else { return RejectedFile(path: path, reason: reason, movedTo: nil) }
        let name = (path as NSString).lastPathComponent
        var target = (directory.rejected as NSString).appendingPathComponent(name)
        var err = StoreFiles.moveNoReplace(path, target)
        var n = 1
        while err == EEXIST, n < 1000 {
            target = (directory.rejected as NSString).appendingPathComponent("\(name).\(n)")
            err = StoreFiles.moveNoReplace(path, target)
            n += 1
        }
        guard err == 0 else {
            return RejectedFile(
                path: path, reason: reason + " (could not move aside: \(String(cString: strerror(err))))", movedTo: nil)
        }
        let reasonPath = target + ".reason"
        let bytes = Array((reason + "\n").utf8)
        // The moved file's name was free; a reason file under it is stale or planted: a link
        // there is removed (unlink never follows), never written through.
        if StoreFiles.createExclusive(reasonPath, bytes) == EEXIST {
            unlink(reasonPath)
            _ = StoreFiles.createExclusive(reasonPath, bytes)
        }
        return RejectedFile(path: path, reason: reason, movedTo: target)
    }

    /// Keeps the newest ``maximumRejected`` files of rejected/ (by the time they were set
    /// aside: their reason file's), removing the others with their reasons. One listing.
    package func trimRejected(keeping limit: Int = Self.maximumRejected) {
        let entries = StoreFiles.entries(directory.rejected)
        var reasons: [String: Double] = [:]
        for entry in entries where entry.name.hasSuffix(".reason") {
            reasons[String(entry.name.dropLast(".reason".count))] = entry.modified
        }
        let files = entries.filter { !$0.name.hasSuffix(".reason") }
        guard files.count > limit else { return }
        let oldestFirst = files.sorted {
            (reasons[$0.name] ?? $0.modified, $0.name) < (reasons[$1.name] ?? $1.modified, $1.name)
        }
        for entry in oldestFirst.prefix(files.count - limit) {
            let p = ReportDirectory.join(directory.rejected, entry.name)
            if entry.type == S_IFDIR { rmdir(p) } else { unlink(p) }
            unlink(p + ".reason")
        }
    }
}
