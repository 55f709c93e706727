import AftermathNextLaunch
import AftermathOTLP
import CSignalShim
import TestSupport
import Foundation
import Testing

/// The delivery of a launch with nothing pending: it does what the full one would (the runs
/// that ended cleanly marked ended) and nothing else, and leaves every other state to it.
@Suite("Quiet delivery")
struct QuietDeliveryTests {
    /// A reports directory as a later launch finds it: this run's reserve and run file, the
    /// spare, two ended runs, one run that ended cleanly and one that is alive (locked).
    struct Launch {
        let system: CraftedSystem
        let directory: ReportDirectory
        let own: ReportCollector.OwnFiles
        let runID: UUID
        let cleanPath: String
        let livePath: String
        let liveLock: Int32
        /// Held as the running process holds them: its reserve and its run file.
        let ownLocks: [Int32]

        init() throws {
            system = try CraftedSystem()
            directory = try TestSupport.reportsDirectory()
            var mine = system.runFile()
            runID = UUID(bytes: &mine.info.context.run_id)
            let reserve = directory.crashes + "/0123456789abcdef0123456789abcdef.crash.tmp"
            try TestSupport.write([], to: reserve)
            let ownRun = directory.runs + "/\(RunRetentionTests.name(mine)).run"
            try RunRetentionTests.write(mine, ownRun)
            own = ReportCollector.OwnFiles(crashReserve: Self.inode(reserve), runFile: Self.inode(ownRun))
            ownLocks = [reserve, ownRun].map { (path: String) -> Int32 in open(path, O_RDONLY) }
            guard ownLocks.allSatisfy({ flock($0, LOCK_EX) == 0 }) else { throw CocoaError(.fileLocking) }
            try TestSupport.write([], to: directory.runs + "/" + AFT_RUN_SPARE_FILE_NAME)
            for _ in 0..<2 {
                let ended = system.runFile()
                try RunRetentionTests.write(ended, directory.runs + "/\(RunRetentionTests.name(ended)).ended")
            }
            var clean = system.runFile()
            clean.exit.clean = AFT_RUN_CLEAN_MARKER
            RunBytes.sealExit(&clean.exit)
            cleanPath = directory.runs + "/\(RunRetentionTests.name(clean)).run"
            try RunRetentionTests.write(clean, cleanPath)
            let live = system.runFile()
            livePath = directory.runs + "/\(RunRetentionTests.name(live)).run"
            try RunRetentionTests.write(live, livePath)
            liveLock = open(livePath, O_RDONLY)
            guard flock(liveLock, LOCK_EX) == 0 else { throw CocoaError(.fileLocking) }
        }

        static func inode(_ path: String) -> UInt64 {
            var st = stat()
            return lstat(path, &st) == 0 ? UInt64(st.st_ino) : 0
        }

        /// A run id that is not an age pass's (one launch in 16 reads the ended runs' ages).
        var collector: ReportCollector {
            var id = runID.uuid
            id.0 = id.0 | 1
            return ReportCollector(
                directory: directory, currentRunID: UUID(uuid: id), environment: system.environment())
        }

        func quiet() -> Bool { collector.deliverQuietly(own: own) }

        func exists(_ path: String) -> Bool { access(path, F_OK) == 0 }

        /// The ended runs' paths in runs/, sorted by name.
        func endedRuns() throws -> [String] {
            try FileManager.default.contentsOfDirectory(atPath: directory.runs)
                .filter { $0.hasSuffix(".ended") }.sorted().map { directory.runs + "/" + $0 }
        }

        /// Makes path last modified that many seconds ago.
        static func setAge(of path: String, seconds: Double) throws {
            try FileManager.default.setAttributes(
                [.modificationDate: Date().addingTimeInterval(-seconds)], ofItemAtPath: path)
        }

        func release() { ([liveLock] + ownLocks).forEach { close($0) } }
    }

    @Test("Nothing pending: the run that ended cleanly is marked ended, the live one and this run's are left")
    func marksCleanRunsEnded() throws {
        let launch = try Launch()
        defer { launch.release() }
        #expect(launch.collector.deliverQuietly(own: launch.own))
        #expect(!launch.exists(launch.cleanPath))
        #expect(launch.exists(String(launch.cleanPath.dropLast(".run".count)) + ".ended"))
        #expect(launch.exists(launch.livePath))
        // The full delivery finds nothing left to do.
        let after = launch.collector.collect()
        #expect(after.reports.isEmpty && after.rejected.isEmpty)
    }

    @Test(
        "Without a spare, the run that ended cleanly becomes it: header zeroed, not truncated, one inode reused, nothing ended"
    )
    func cleanRunRecycledAsSpare() throws {
        let launch = try Launch()
        defer { launch.release() }
        let spare = launch.directory.runs + "/" + AFT_RUN_SPARE_FILE_NAME
        unlink(spare)
        let cleanInode = Launch.inode(launch.cleanPath)
        let endedBefore = try launch.endedRuns()
        #expect(launch.quiet())
        var st = stat()
        #expect(lstat(spare, &st) == 0 && UInt64(st.st_ino) == cleanInode && st.st_nlink == 1)
        // Its blocks kept (no truncation): the next run overwrites the file whole.
        #expect(Int(st.st_size) == MemoryLayout<aft_run_file>.size)
        let bytes = [UInt8](try #require(FileManager.default.contents(atPath: spare)))
        #expect(bytes.prefix(MemoryLayout<aft_file_header>.size).allSatisfy { $0 == 0 }, "its header zeroed")
        #expect(bytes.count > MemoryLayout<aft_file_header>.size)
        #expect(aft_run_spare_unwritten(AT_FDCWD, spare) == 1)
        #expect(st.st_mode & 0o777 == 0o600)
        #expect(!launch.exists(launch.cleanPath))
        #expect(try launch.endedRuns() == endedBefore, "no run marked ended")
        #expect(launch.exists(launch.livePath))
        // The full delivery finds nothing left to do, and keeps the spare.
        let after = launch.collector.collect()
        #expect(after.reports.isEmpty && after.rejected.isEmpty)
        #expect(Launch.inode(spare) == cleanInode)
    }

    @Test("A run that ended without its exit block is left to the full delivery, which reports it")
    func abnormalRunIsNotQuiet() throws {
        let launch = try Launch()
        defer { launch.release() }
        let dead = launch.system.runFile()
        let deadPath = launch.directory.runs + "/\(RunRetentionTests.name(dead)).run"
        try RunRetentionTests.write(dead, deadPath)
        #expect(!launch.quiet())
        #expect(launch.exists(deadPath), "not renamed")
        let exits = launch.collector.collect().reports.filter { $0.kind == .abnormalExit }
        #expect(exits.count == 1 && exits.first?.path == deadPath)
    }

    @Test(
        "Any pending report, leftover or foreign file is the full delivery's",
        arguments: [
            "crashes/0123456789abcdef0123456789abcdee.crash", "crashes/0123456789abcdef0123456789abcdee.crash.tmp",
            "hangs/0123456789abcdef0123456789abcdef.hang", "errors/0123456789abcdef0123456789abcdef.error",
            "attachments/0123456789abcdef0123456789abcdef.dmp", "runs/0123456789abcdef0123456789abcdef.run.tmp",
            "runs/notes.txt", "runs/0123456789abcdef.run", "runs/0123456789abcdef0123456789abcdeg.ended",
            "runs/0123456789abcdef0123456789abcde.ended", "runs/0123456789abcdef0123456789abcdef.endedx",
            "runs/0123456789abcdef0123456789abcdef0.ended",
        ])
    func otherFilesAreNotQuiet(relative: String) throws {
        let launch = try Launch()
        defer { launch.release() }
        let path = launch.directory.root + "/" + relative
        if relative.hasPrefix("attachments/") { try launch.directory.prepareAttachments() }
        try TestSupport.write([1, 2, 3], to: path)
        #expect(!launch.quiet())
    }

    @Test("A spare of a run file's size is unwritten only with a zero header, and larger never")
    func spareUnwrittenOnlyWithZeroHeader() throws {
        let runSize = MemoryLayout<aft_run_file>.size, headerSize = MemoryLayout<aft_file_header>.size
        for (bytes, unwritten) in [
            ([UInt8](), true), ([UInt8](repeating: 0, count: runSize), true),
            ([UInt8](repeating: 0, count: headerSize) + [7, 7], true),
            ([UInt8](repeating: 0, count: headerSize - 1), false),
            ([1] + [UInt8](repeating: 0, count: runSize - 1), false),
            (
                [UInt8](repeating: 0, count: headerSize - 1) + [1] + [UInt8](repeating: 0, count: runSize - headerSize),
                false
            ),
            ([UInt8](repeating: 0, count: runSize + 1), false),
        ] {
            let launch = try Launch()
            defer { launch.release() }
            let spare = launch.directory.runs + "/" + AFT_RUN_SPARE_FILE_NAME
            try TestSupport.write(bytes, to: spare)
            #expect((aft_run_spare_unwritten(AT_FDCWD, spare) == 1) == unwritten, "\(bytes.count) bytes")
            #expect(launch.quiet() == unwritten, "\(bytes.count) bytes: quiet only with an unwritten spare")
            // The full delivery keeps an unwritten spare and removes a written one (unlocked).
            _ = launch.collector.collect()
            #expect(launch.exists(spare) == unwritten, "\(bytes.count) bytes")
        }
        // A directory or a link by the spare's name is never an unwritten spare.
        let launch = try Launch()
        defer { launch.release() }
        let spare = launch.directory.runs + "/" + AFT_RUN_SPARE_FILE_NAME
        try TestSupport.write([], to: launch.directory.root + "/elsewhere")
        unlink(spare)
        #expect(symlink(launch.directory.root + "/elsewhere", spare) == 0)
        #expect(aft_run_spare_unwritten(AT_FDCWD, spare) == 0)
        unlink(spare)
        #expect(mkdir(spare, 0o700) == 0)
        #expect(aft_run_spare_unwritten(AT_FDCWD, spare) == 0)
    }

    @Test("A spare that is not empty, a dead run older than the report age, five dead runs: not quiet")
    func boundsAreNotQuiet() throws {
        let spare = try Launch()
        defer { spare.release() }
        try TestSupport.write([1], to: spare.directory.runs + "/" + AFT_RUN_SPARE_FILE_NAME)
        #expect(!spare.quiet())

        let old = try Launch()
        defer { old.release() }
        try Launch.setAge(of: old.cleanPath, seconds: 31 * 24 * 3600)
        #expect(!old.quiet())
        #expect(old.exists(old.cleanPath), "left for the full delivery to reject")

        let many = try Launch()
        defer { many.release() }
        for _ in 0..<4 {
            var clean = many.system.runFile()
            clean.exit.clean = AFT_RUN_CLEAN_MARKER
            RunBytes.sealExit(&clean.exit)
            try RunRetentionTests.write(clean, many.directory.runs + "/\(RunRetentionTests.name(clean)).run")
        }
        #expect(!many.quiet())
    }

    @Test("Over the run count: the oldest ended runs go, down to three quarters of it, quietly", arguments: [1, 512])
    func overCountIsQuiet(removals: Int) throws {
        let launch = try Launch()
        defer { launch.release() }
        let ended = try launch.endedRuns()
        try #require(ended.count == 2)
        try Launch.setAge(of: ended[1], seconds: 7200)
        try Launch.setAge(of: ended[0], seconds: 3600)
        var few = launch.collector
        few.limits.maxRunFiles = 4  // this run's, the live one, two ended, the clean one: 5, down to 3
        few.limits.maxRemovalsPerCollection = removals
        #expect(few.deliverQuietly(own: launch.own))
        #expect(!launch.exists(ended[1]), "the oldest")
        #expect(launch.exists(ended[0]) == (removals == 1), "the next oldest, within the removal budget")
        #expect(launch.exists(String(launch.cleanPath.dropLast(".run".count)) + ".ended"), "the newest ended run kept")
        #expect(launch.exists(launch.livePath))
        // The full delivery finds nothing left to do.
        let after = few.collect()
        #expect(after.reports.isEmpty && after.rejected.isEmpty)
        #expect(launch.exists(ended[0]) == (removals == 1))
    }

    @Test("At a launch that reads ages: ended runs past the run age limit are removed, quietly")
    func agePassIsQuiet() throws {
        let launch = try Launch()
        defer { launch.release() }
        let ended = try launch.endedRuns()
        try #require(ended.count == 2)
        try Launch.setAge(of: ended[0], seconds: 8 * 24 * 3600)
        // Another launch's turn reads no age: the old one stays.
        #expect(launch.quiet())
        #expect(launch.exists(ended[0]) && launch.exists(ended[1]))
        var id = launch.runID.uuid
        id.0 = 0x30  // one launch in 16
        var agePass = ReportCollector(
            directory: launch.directory, currentRunID: UUID(uuid: id), environment: launch.system.environment())
        agePass.limits.maxRemovalsPerCollection = 0
        #expect(agePass.deliverQuietly(own: launch.own))
        #expect(launch.exists(ended[0]), "no removal left in the budget")
        agePass.limits.maxRemovalsPerCollection = 512
        #expect(agePass.deliverQuietly(own: launch.own))
        #expect(!launch.exists(ended[0]), "past the run age limit")
        #expect(launch.exists(ended[1]))
        #expect(launch.exists(launch.livePath))
        // The full delivery's own age pass finds nothing left to do.
        let after = agePass.collect()
        #expect(after.reports.isEmpty && after.rejected.isEmpty)
        #expect(launch.exists(ended[1]))
    }

    @Test("A delivery lock file that cannot be used (a planted link): not quiet, nothing renamed")
    func unusableLockIsNotQuiet() throws {
        let launch = try Launch()
        defer { launch.release() }
        #expect(symlink("/dev/null", launch.directory.root + "/.deliver.lock") == 0)
        #expect(!launch.quiet())
        #expect(launch.exists(launch.cleanPath))
    }
}
