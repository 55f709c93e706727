import CSignalShim
import Foundation
#if canImport(Glibc)
import Glibc
#endif

extension ReportCollector {
    /// The running process's own files in the directory, by inode number (0: none).
    package struct OwnFiles: Sendable {
        /// Its crash reserve in crashes/.
        package var crashReserve: UInt64
        /// Its run file in runs/.
        package var runFile: UInt64

        package init(crashReserve: UInt64, runFile: UInt64) {
            self.crashReserve = crashReserve
            self.runFile = runFile
        }

        /// This process's, as installed by start.
        package static func installed() -> OwnFiles {
            OwnFiles(crashReserve: aft_crash_reserve_inode(), runFile: aft_run_file_inode())
        }
    }

    /// Most launches find nothing to send: crashes/ holds only this run's reserve, hangs/,
    /// errors/ and attachments/ nothing, and runs/ this run's file, the spare, ended runs and
    /// the few runs that ended since, cleanly (their exit block written) or still alive. What
    /// ``deliver(to:attachments:resource:)`` would do then is rename the clean ones to .ended;
    /// this does that from the directories' listings, under the same locks, without the
    /// collection's passes (their file, record and collection types cost every launch's
    /// delivery thread about 0.2 ms and 6-8 pages of the Swift runtime's memory). At one launch
    /// in 16, the full delivery's turn to read the ended runs' ages, it removes those past the
    /// run age limit as that one would (the full delivery made such a launch cost about 1.1 ms
    /// more CPU); over the run count, it removes the oldest ended runs as that one would. False
    /// when anything else is there: the full delivery then runs, and finds at most those
    /// renames and removals done. Returns whether it did the delivery (a Bool: an optional
    /// ``Delivery`` would have the runtime build its type's metadata by name at every launch).
    package func deliverQuietly(own: OwnFiles) -> Bool {
        guard let currentRunID else { return false }
        guard aft_delivery_lock() == 0 else { return false }
        defer { aft_delivery_unlock() }
        let lockPath = directory.deliveryLock
        guard case .success(let lock) = StoreFiles.openLockFile(lockPath) else { return false }
        defer { close(lock) }
        guard Self.lockWholeFile(lock), aft_crash_in_progress() == 0 else { return false }
        return Self.holdsNothing(directory.crashes, but: own.crashReserve)
            && Self.holdsNothing(directory.hangs, but: 0) && Self.holdsNothing(directory.errors, but: 0)
            && Self.holdsNothing(directory.attachments, but: 0, orIsMissing: true)
            && endCleanRuns(ownRunFile: own.runFile, currentRunID: currentRunID)
    }

    /// Whether dir lists no entry but hidden ones and the one with inode `allowed`.
    static func holdsNothing(_ dir: String, but allowed: UInt64, orIsMissing missingIsEmpty: Bool = false) -> Bool {
        switch StoreFiles.walk(
            dir, { name, inode, _, _ in name.first == UInt8(ascii: ".") || (allowed != 0 && inode == allowed) })
        {
        case .ended: return true
        case .cannotOpen(let error): return missingIsEmpty && error == ENOENT
        case .stopped, .failed: return false
        }
    }

    /// runs/ as ``collectRuns(_:)`` would leave it with nothing to report: every dead run that
    /// ended cleanly renamed to .ended (the first, where no spare is, made the next launch's
    /// spare instead) and, at an age pass (one launch in 16), every ended run past the run age
    /// limit removed. False at the first entry it would do more with (a run
    /// that ended otherwise, or too old, a leftover, a foreign name, more than four dead runs),
    /// or when the ended runs are over the count. Every entry is reached from the open
    /// directory by its name (fstatat, openat, renameat): no path String, whose first release
    /// in a process, 63 bytes or longer, has the Swift runtime look a type up by name
    /// (its breadcrumbs'), about 0.06-0.1 ms once.
    func endCleanRuns(ownRunFile: UInt64, currentRunID: UUID) -> Bool {
        let now = Double(Clock.realtimeNanoseconds()) / 1e9
        let agePass = currentRunID.uuid.0 & 15 == 0
        var removals = limits.maxRemovalsPerCollection
        var kept = 0
        var dead = 0
        var recycled = false
        let walked = StoreFiles.walk(directory.runs) { raw, inode, type, directory in
            let entry = raw.baseAddress!.assumingMemoryBound(to: CChar.self)
            // Most entries are ended runs, kept for their reports' sessions: known from the raw
            // name, without a String (a long-used runs/ holds dozens).
            if Int(type) == Int(DT_REG), Self.isEndedRunName(raw) {
                if agePass, removals > 0, let modified = Self.modified(entry, in: directory),
                    modified < now - limits.maxRunAgeSeconds
                {
                    removals -= 1
                    if unlinkat(directory, entry, 0) == 0 { return true }
                }
                kept += 1
                return true
            }
            let name = String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            if name.hasPrefix(".") { return true }
            guard Int(type) == Int(DT_REG) else { return false }
            if inode == ownRunFile {
                kept += 1
                return true
            }
            // The spare this walk recycled, or one a launch may take.
            if name == AFT_RUN_SPARE_FILE_NAME { return recycled || aft_run_spare_unwritten(directory, entry) == 1 }
            var st = stat()
            guard fstatat(directory, entry, &st, AT_SYMLINK_NOFOLLOW) == 0 else { return false }
            let isEnded = name.hasSuffix(".ended")
            guard isEnded || name.hasSuffix(".run"), Self.hasRunIDStem(name) else { return false }
            if isEnded {  // an ended run's name read otherwise: its age is the full delivery's
                kept += 1
                return !agePass
            }
            dead += 1
            guard dead <= 4, now - Double(st.st_mtim.tv_sec) <= limits.maxReportAgeSeconds else { return false }
            // One open to tell a live run (its process holds the lock) and to read a dead one:
            // non-blocking, no final link, as FileReader opens. For writing where it may be: a
            // clean one may become the next launch's spare.
            let flags = O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC
            var writable = true
            var fd = openat(directory, entry, O_RDWR | flags)
            if fd < 0 {
                writable = false
                fd = openat(directory, entry, O_RDONLY | flags)
            }
            guard fd >= 0 else { return false }
            defer { close(fd) }
            if flock(fd, LOCK_EX | LOCK_NB) != 0 {
                guard errno == EWOULDBLOCK else { return false }
                kept += 1  // alive
                return true
            }
            guard
                let run = try? FileReader.withBytes(
                    fd: fd, maximumSize: RunFile.maximumSize,
                    { (raw) throws(ReportFileError) in try RunFile.decode(raw) }),
                run.exit != nil, run.runID != currentRunID
            else { return false }
            // Nothing of its run is left to send, so nothing will look its sessions up: where no
            // spare is, its file is the next launch's (no inode made, none removed later).
            if writable, !recycled, aft_run_recycle_as_spare(directory, entry, fd) == 0 {
                recycled = true
                return true
            }
            let ended = String(name.dropLast(".run".count)) + ".ended"  // a run id's 38 bytes
            guard renameat(directory, entry, directory, ended) == 0 else { return false }
            kept += 1
            return true
        }
        guard case .ended = walked else { return false }
        return kept <= limits.maxRunFiles || removeOldestEndedRuns(total: kept, removals: removals)
    }

    /// Over the run count: the oldest ended runs (by their last modification) removed until
    /// three quarters of the count are left, as ``collectRuns(_:)`` would, so that the next
    /// launches, each ending one more run, list them without reading their ages. False when
    /// runs/ cannot be read again.
    func removeOldestEndedRuns(total: Int, removals: Int) -> Bool {
        var ended: [(name: String, modified: Double)] = []
        let walked = StoreFiles.walk(directory.runs) { raw, _, type, directory in
            let name = raw.baseAddress!.assumingMemoryBound(to: CChar.self)
            guard Int(type) == Int(DT_REG), Self.isEndedRunName(raw), let modified = Self.modified(name, in: directory)
            else { return true }
            ended.append((String(cString: name), modified))
            return true
        }
        guard case .ended = walked else { return false }
        let keep = limits.maxRunFiles - limits.maxRunFiles / 4
        let oldestFirst = StoreFiles.stablySorted(ended.sorted { $0.name < $1.name }) { $0.modified < $1.modified }
        let runs = open(directory.runs, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard runs >= 0 else { return false }
        defer { close(runs) }
        var total = total
        var removals = removals
        for file in oldestFirst where total > keep && removals > 0 {
            removals -= 1
            if unlinkat(runs, file.name, 0) == 0 { total -= 1 }
        }
        return true
    }

    /// When the entry name in the open directory was last modified (seconds since the epoch),
    /// as lstat sees it; nil when it cannot be read.
    static func modified(_ name: UnsafePointer<CChar>, in directory: Int32) -> Double? {
        var st = stat()
        guard fstatat(directory, name, &st, AT_SYMLINK_NOFOLLOW) == 0 else { return nil }
        return Double(st.st_mtim.tv_sec) + Double(st.st_mtim.tv_nsec) / 1e9
    }

    /// Whether name begins with a run id (32 hex digits) and a dot: read on its bytes, with no
    /// array of them, whose type the runtime builds by name.
    static func hasRunIDStem(_ name: String) -> Bool {
        var name = name
        return name.withUTF8 { bytes in
            bytes.count > 32 && bytes[32] == UInt8(ascii: ".") && bytes[..<32].allSatisfy(Self.isHexDigit)
        }
    }

    static func isHexDigit(_ c: UInt8) -> Bool {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"),
            UInt8(ascii: "A")...UInt8(ascii: "F"):
            return true
        default: return false
        }
    }

    /// Whether a NUL-terminated directory entry name is an ended run's: 32 hex digits (a run
    /// id), then ".ended".
    static func isEndedRunName(_ raw: UnsafeRawBufferPointer) -> Bool {
        let suffix: StaticString = ".ended"
        let idLength = 32
        let length = idLength + suffix.utf8CodeUnitCount
        guard raw.count > length, raw[length] == 0 else { return false }
        for i in 0..<idLength where !isHexDigit(raw[i]) { return false }
        return suffix.withUTF8Buffer { tail in
            tail.indices.allSatisfy { raw[idLength + $0] == tail[$0] }
        }
    }
}
