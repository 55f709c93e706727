import CSignalShim
import Foundation
import Testing
import Aftermath
import AftermathNextLaunch
import AftermathOTLP
import AftermathTesting
import Synchronization
import TestSupport

/// A reports directory someone else prepared: FIFOs where files should be, planted symlinks,
/// directories with the wrong owner or mode. Nothing may block, follow a link or widen access.
@Suite("Hostile store")
struct HostileStoreTests {
    /// Runs body on a thread and waits at most `seconds`. On timeout the FIFOs are opened for
    /// writing, given a byte and closed, so a reader blocked on them returns and the test ends
    /// (failed) instead of hanging the suite.
    static func finishes(
        within seconds: Double = 10, unblocking fifos: [String], _ body: @escaping @Sendable () -> Void
    ) -> Bool {
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            body()
            done.signal()
        }
        if done.wait(timeout: .now() + seconds) == .success { return true }
        for fifo in fifos {
            let fd = open(fifo, O_RDWR | O_NONBLOCK | O_CLOEXEC)
            if fd >= 0 {
                _ = write(fd, "x", 1)
                close(fd)
            }
        }
        _ = done.wait(timeout: .now() + seconds)
        return false
    }

    @Test("FIFOs under every pending name neither block the collection nor the read-only dump")
    func fifosDoNotBlock() throws {
        let dir = try TestSupport.reportsDirectory()
        var fifos: [String] = []
        for (folder, names) in [
            (dir.runs, ["a.run", "b.run.tmp", "c.ended"]),
            (dir.crashes, ["d.crash", "e.crash.tmp"]),
            (dir.hangs, ["f.hang", "g.hang.tmp"]),
            (dir.errors, ["h.error", "i.error.tmp", "j.txt"]),
        ] {
            for name in names {
                let path = folder + "/" + name
                #expect(mkfifo(path, 0o600) == 0)
                fifos.append(path)
            }
        }
        // A .tmp younger than its writer's grace period is left alone; these are old.
        for path in fifos { Self.age(path, seconds: 3600) }
        let collector = ReportCollector(directory: dir)
        let readOnly = Mutex<ReportCollector.Collection?>(nil)
        #expect(Self.finishes(unblocking: fifos) { readOnly.withLock { $0 = collector.collect(moveRejected: false) } })
        let moving = Mutex<ReportCollector.Collection?>(nil)
        #expect(Self.finishes(unblocking: fifos) { moving.withLock { $0 = collector.collect(moveRejected: true) } })
        let collection = try #require(moving.withLock { $0 })
        #expect(collection.reports.isEmpty)
        let reasons = Dictionary(
            collection.rejected.map { (($0.path as NSString).lastPathComponent, $0.reason) },
            uniquingKeysWith: { a, _ in a })
        for path in fifos {
            let name = (path as NSString).lastPathComponent
            #expect(reasons[name] == "not a regular file (a FIFO)", "\(name): \(reasons[name] ?? "not rejected")")
        }
        // All moved aside, each with its reason.
        let rejected = try FileManager.default.contentsOfDirectory(atPath: dir.rejected)
        #expect(rejected.filter { $0.hasSuffix(".reason") }.count == fifos.count)
    }

    @Test("A FIFO where a dead run's cgroup counter file was does not block judging it")
    func fifoCounterFile() throws {
        let system = try CraftedSystem()
        let directory = try TestSupport.reportsDirectory()
        let run = system.runFile()
        var f = run
        let name = Hex.encode(UUID(bytes: &f.info.context.run_id).bytes)
        try TestSupport.write(RunBytes.of(run), to: directory.runs + "/\(name).run")
        var fifos: [String] = []
        for cgroup in [
            "sys/fs/cgroup/app/svc/memory.events", "sys/fs/cgroup/app/memory.events",
            "sys/fs/cgroup/memory/app/svc/memory.oom_control", "sys/fs/cgroup/memory/app/memory.oom_control",
        ] {
            let path = system.root + "/" + cgroup
            unlink(path)
            #expect(mkfifo(path, 0o600) == 0)
            fifos.append(path)
        }
        let result = Mutex<ReportCollector.Collection?>(nil)
        let environment = system.environment()
        #expect(
            Self.finishes(unblocking: fifos) {
                let c = ReportCollector(directory: directory, environment: environment).collect()
                result.withLock { $0 = c }
            })
        // Judged without the counters: reported (the run ended without a trace), not stuck.
        #expect(result.withLock { $0?.reports.count } == 1)
    }

    @Test("A FIFO as the delivery lock file gives an error, not a hang")
    func fifoLock() throws {
        let dir = try TestSupport.reportsDirectory()
        let lock = dir.root + "/.deliver.lock"
        #expect(mkfifo(lock, 0o600) == 0)
        let result = Mutex<String?>(nil)
        #expect(
            Self.finishes(unblocking: [lock]) {
                let d = ReportCollector(directory: dir).deliver(to: InMemoryExporter(), resource: Resource())
                result.withLock { $0 = d.exportError }
            })
        #expect(result.withLock { $0 }?.contains("not a regular file") == true)
    }

    @Test("A symlink planted at rejected/<name>.reason is not followed; its target is unchanged")
    func plantedReasonLink() throws {
        let dir = try TestSupport.reportsDirectory()
        let victim = FileManager.default.temporaryDirectory.appendingPathComponent("aftermath-victim-\(UUID())").path
        try TestSupport.write(Array("precious\n".utf8), to: victim)
        try TestSupport.write(Array("junk".utf8), to: dir.crashes + "/bad.crash")
        try FileManager.default.createSymbolicLink(
            atPath: dir.rejected + "/bad.crash.reason", withDestinationPath: victim)
        let collection = ReportCollector(directory: dir).collect()
        #expect(collection.rejected.count == 1)
        #expect(try String(contentsOfFile: victim, encoding: .utf8) == "precious\n")
        let moved = try #require(collection.rejected.first?.movedTo)
        var st = stat()
        #expect(lstat(moved + ".reason", &st) == 0)
        #expect(st.st_mode & S_IFMT == S_IFREG)
        #expect(st.st_mode & 0o777 == 0o600)
        #expect(
            try String(contentsOfFile: moved + ".reason", encoding: .utf8).hasPrefix("not an Aftermath report")
                || (try String(contentsOfFile: moved + ".reason", encoding: .utf8)).contains("truncated"))
    }

    @Test("Files Aftermath creates are 0600 whatever the umask, directories 0700")
    func modes() throws {
        let old = umask(0)
        defer { umask(old) }
        let root = TestSupport.childDirectory("modes")
        let dir = ReportDirectory(root: root)
        try dir.prepare()
        for d in [dir.root, dir.crashes, dir.hangs, dir.runs, dir.errors, dir.rejected] {
            var st = stat()
            #expect(lstat(d, &st) == 0 && st.st_mode & 0o777 == 0o700, "\(d)")
        }
        try TestSupport.write(Array("junk".utf8), to: dir.crashes + "/bad.crash")
        let collection = ReportCollector(directory: dir).collect()
        let moved = try #require(collection.rejected.first?.movedTo)
        var st = stat()
        #expect(lstat(moved + ".reason", &st) == 0 && st.st_mode & 0o777 == 0o600)
        let outbox = root + "/outbox"
        try FileExporter(directory: outbox).export(
            LogBatch(
                resource: Resource(), scopeName: "s", scopeVersion: "1",
                records: [LogRecord(timeUnixNano: 1)]))
        let written = try FileManager.default.contentsOfDirectory(atPath: outbox)
        #expect(written.count == 1)
        #expect(lstat(outbox + "/" + written[0], &st) == 0 && st.st_mode & 0o777 == 0o600)
        #expect(lstat(outbox, &st) == 0 && st.st_mode & 0o777 == 0o700)
    }

    @Test("A reports directory writable by group or others is repaired to 0700 when it is ours")
    func repairsMode() throws {
        let root = TestSupport.childDirectory("wide")
        #expect(mkdir(root, 0o700) == 0)
        #expect(chmod(root, 0o777) == 0)
        #expect(mkdir(root + "/crashes", 0o700) == 0)
        #expect(chmod(root + "/crashes", 0o775) == 0)
        try ReportDirectory(root: root).prepare()
        var st = stat()
        #expect(lstat(root, &st) == 0 && st.st_mode & 0o777 == 0o700)
        #expect(lstat(root + "/crashes", &st) == 0 && st.st_mode & 0o777 == 0o700)
    }

    @Test("A reports directory owned by another user is refused with a clear error")
    func refusesForeignOwner() throws {
        guard geteuid() == 0 else {
            print("SKIPPED refusesForeignOwner: needs root to chown a directory to another user")
            return
        }
        for sub in ["", "/runs"] {
            let root = TestSupport.childDirectory("foreign")
            try ReportDirectory(root: root).prepare()
            #expect(chown(root + sub, 65534, 65534) == 0)
            do {
                try ReportDirectory(root: root).prepare()
                Issue.record("a directory owned by uid 65534 was accepted")
            } catch {
                guard case .cannotCreate(let path, let reason) = error else { continue }
                #expect(path == root + sub)
                #expect(reason.contains("owned by uid 65534"), "\(reason)")
            }
        }
    }

    @Test("A reports directory whose parent another user could write to is refused")
    func refusesSwappableParent() throws {
        let parent = TestSupport.childDirectory("parent")
        #expect(mkdir(parent, 0o700) == 0)
        #expect(chmod(parent, 0o777) == 0)  // writable by all, not sticky
        do {
            try ReportDirectory(root: parent + "/reports").prepare()
            Issue.record("a root in a world-writable, non-sticky parent was accepted")
        } catch {
            guard case .cannotCreate(_, let reason) = error else { return }
            #expect(reason.contains("writable by others without the sticky bit"), "\(reason)")
        }
        #expect(chmod(parent, 0o1777) == 0)  // sticky, like /tmp: accepted
        try ReportDirectory(root: parent + "/reports").prepare()
        guard geteuid() == 0 else {
            print("SKIPPED refusesSwappableParent (foreign owner): needs root to chown")
            return
        }
        let foreign = TestSupport.childDirectory("foreign-parent")
        #expect(mkdir(foreign, 0o755) == 0)
        #expect(chown(foreign, 65534, 65534) == 0)
        #expect(throws: ReportDirectoryError.self) { try ReportDirectory(root: foreign + "/reports").prepare() }
    }

    static func age(_ path: String, seconds: Int) {
        let t = time(nil) - seconds
        var times = [timespec(tv_sec: t, tv_nsec: 0), timespec(tv_sec: t, tv_nsec: 0)]
        _ = utimensat(AT_FDCWD, path, &times, AT_SYMLINK_NOFOLLOW)
    }
}
