import AftermathNextLaunch
import AftermathOTLP
import CSignalShim
import TestSupport
import Foundation
import Testing

/// runs/ on the next launch: locks, retention, bad files.
@Suite("Run retention")
struct RunRetentionTests {
    static func write(_ file: aft_run_file, _ path: String, age: Double = 0) throws {
        try TestSupport.write(RunBytes.of(file), to: path)
        if age > 0 {
            try FileManager.default.setAttributes(
                [.modificationDate: Date().addingTimeInterval(-age)], ofItemAtPath: path)
        }
    }

    static func name(_ file: aft_run_file) -> String {
        var f = file
        return Hex.encode(UUID(bytes: &f.info.context.run_id).bytes)
    }

    @Test("Over 64 run files: the oldest ended ones go until 48 are left, none older than 7 days; half-written ones go")
    func keepsAtMost64NoneOlderThan7DaysAndRemovesHalfWritten() throws {
        let system = try CraftedSystem()
        let directory = try TestSupport.reportsDirectory()
        for i in 0..<70 {
            var f = system.runFile()
            f.exit.clean = AFT_RUN_CLEAN_MARKER
            RunBytes.sealExit(&f.exit)
            try Self.write(f, directory.runs + "/\(Self.name(f)).run", age: Double(70 - i) * 60)
        }
        let old = system.runFile()
        try Self.write(old, directory.runs + "/\(Self.name(old)).ended", age: 8 * 24 * 3600)
        try TestSupport.write(Array(RunBytes.of(system.runFile()).prefix(500)), to: directory.runs + "/dead.run.tmp")
        // A live instance: its file is locked.
        let live = system.runFile()
        let livePath = directory.runs + "/\(Self.name(live)).run"
        try Self.write(live, livePath)
        let fd = open(livePath, O_RDONLY)
        #expect(flock(fd, LOCK_EX) == 0)
        defer { close(fd) }
        // One that ended abnormally: reported, kept until acknowledged.
        let dead = system.runFile()
        let deadPath = directory.runs + "/\(Self.name(dead)).run"
        try Self.write(dead, deadPath)

        let collection = ReportCollector(directory: directory, environment: system.environment()).collect()
        let exits = collection.reports.filter { $0.kind == .abnormalExit }
        #expect(exits.count == 1 && exits.first?.path == deadPath)
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.runs)
        #expect(names.count == 48)
        #expect(names.contains((livePath as NSString).lastPathComponent))
        #expect(names.contains((deadPath as NSString).lastPathComponent))
        #expect(!names.contains("dead.run.tmp"))
        #expect(!names.contains("\(Self.name(old)).ended"))
        let ended = names.filter { $0.hasSuffix(".ended") }
        #expect(ended.count == 46)
        #expect(ended.allSatisfy { Self.age(directory.runs + "/" + $0) < 47 * 60 }, "the newest kept")
    }

    static func age(_ path: String) -> Double {
        var st = stat()
        guard lstat(path, &st) == 0 else { return .infinity }
        return Date().timeIntervalSince1970 - Double(st.st_mtim.tv_sec)
    }

    @Test(
        "Within the count, an ended run older than 7 days goes at a launch that looks at ages (one in 16), not before")
    func ageLimitAtOneLaunchInSixteen() throws {
        let system = try CraftedSystem()
        let directory = try TestSupport.reportsDirectory()
        let old = system.runFile()
        let oldPath = directory.runs + "/\(Self.name(old)).ended"
        try Self.write(old, oldPath, age: 8 * 24 * 3600)
        var lookingElsewhere = UUID().uuid
        lookingElsewhere.0 = 0x11
        _ = ReportCollector(
            directory: directory, currentRunID: UUID(uuid: lookingElsewhere), environment: system.environment()
        ).collect()
        #expect(access(oldPath, F_OK) == 0, "left for a launch that reads ages")
        var looking = lookingElsewhere
        looking.0 = 0x10
        _ = ReportCollector(directory: directory, currentRunID: UUID(uuid: looking), environment: system.environment())
            .collect()
        #expect(access(oldPath, F_OK) != 0, "gone")
    }

    @Test func aLockedRunIsNeverJudgedAndAUnlockedOneIs() throws {
        let system = try CraftedSystem()
        let directory = try TestSupport.reportsDirectory()
        let run = system.runFile()
        let path = directory.runs + "/\(Self.name(run)).run"
        try Self.write(run, path)
        let fd = open(path, O_RDONLY)
        #expect(flock(fd, LOCK_EX) == 0)
        let whileLocked = ReportCollector(directory: directory, environment: system.environment()).collect()
        #expect(!whileLocked.reports.contains { $0.kind == .abnormalExit })
        close(fd)
        let afterwards = ReportCollector(directory: directory, environment: system.environment()).collect()
        #expect(afterwards.reports.filter { $0.kind == .abnormalExit }.count == 1)
    }

    @Test func aBadRunFileIsSetAsideAndOthersStillReported() throws {
        let system = try CraftedSystem()
        let directory = try TestSupport.reportsDirectory()
        let good = system.runFile()
        try Self.write(good, directory.runs + "/\(Self.name(good)).run")
        var torn = RunBytes.of(system.runFile())
        torn[700] ^= 0x55
        try TestSupport.write(torn, to: directory.runs + "/torn.run")
        try TestSupport.write(Array(RunBytes.of(system.runFile()).prefix(40)), to: directory.runs + "/short.run")
        let collection = ReportCollector(directory: directory, environment: system.environment()).collect()
        #expect(collection.reports.filter { $0.kind == .abnormalExit }.count == 1)
        #expect(Set(collection.rejected.map { ($0.path as NSString).lastPathComponent }) == ["torn.run", "short.run"])
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.rejected).contains("torn.run"))
    }

    @Test func aDumpReportsButChangesNothing() throws {
        let system = try CraftedSystem()
        let directory = try TestSupport.reportsDirectory()
        let run = system.runFile()
        let path = directory.runs + "/\(Self.name(run)).run"
        try Self.write(run, path)
        let dump = ReportCollector(directory: directory, environment: system.environment()).collect(moveRejected: false)
        #expect(dump.reports.count == 1)
        #expect(FileManager.default.fileExists(atPath: path))
    }
}
