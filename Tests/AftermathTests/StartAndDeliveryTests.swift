import Aftermath
import AftermathNextLaunch
import AftermathOTLP
import AftermathTesting
import CSignalShim
import CHarnessFaults
import TestSupport
import Foundation
import Testing

/// start() called twice, deliveries that overlap, and values longer than their file fields.
@Suite("Start and delivery")
struct StartAndDeliveryTests {
    /// Refuses its export after forking a child that sleeps (as an app that starts a process
    /// while Aftermath delivers): the child holds a copy of every descriptor for a while.
    final class ForkingRefusingExporter: LogExporter, @unchecked Sendable {
        let lock = NSLock()
        var child: pid_t = -1
        func export(_ batch: LogBatch) throws {
            let pid = aft_test_fork_sleeper(600)
            lock.withLock { child = pid }
            throw ExportError("refused after a fork")
        }
    }

    @Test(
        "A child forked during a delivery does not hold the next delivery back (the lock is the process's, not its descriptor's)"
    )
    func forkedChildDoesNotHoldTheDeliveryLock() throws {
        let dir = try TestSupport.reportsDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir.root) }
        try TestSupport.write(try TestSupport.fixture("v1/sigsegv-null-depth12.crash"), to: dir.crashes + "/a.crash")
        let forking = ForkingRefusingExporter()
        let refused = ReportCollector(directory: dir).deliver(to: forking, resource: Resource())
        #expect(refused.exported == 0 && refused.exportError != nil)
        let child = forking.lock.withLock { forking.child }
        #expect(child > 0)
        defer {
            var status: Int32 = 0
            if child > 0 { waitpid(child, &status, 0) }
        }
        let exporter = InMemoryExporter()
        let accepted = ReportCollector(directory: dir).deliver(to: exporter, resource: Resource())
        #expect(accepted.exported == 1, "\(accepted.exportError ?? "no error")")
        #expect(kill(child, 0) == 0, "the child still lives during the second delivery")
    }

    /// An exporter that takes its time and counts what it was given.
    final class SlowCountingExporter: LogExporter, @unchecked Sendable {
        let lock = NSLock()
        var uids: [String] = []
        func export(_ batch: LogBatch) throws {
            Thread.sleep(forTimeInterval: 0.2)
            lock.withLock { uids += batch.records.compactMap { $0[attribute: "log.record.uid"]?.stringValue } }
        }
    }

    @Test("Two deliveries at once send each report once")
    func overlappingDeliveries() throws {
        let dir = try TestSupport.reportsDirectory()
        let golden = try TestSupport.fixture("v1/sigsegv-null-depth12.crash")
        try TestSupport.write(golden, to: dir.crashes + "/a.crash")
        let exporter = SlowCountingExporter()
        let group = DispatchGroup()
        for _ in 0..<2 {
            group.enter()
            Thread.detachNewThread {
                _ = ReportCollector(directory: dir).deliver(to: exporter, resource: Resource())
                group.leave()
            }
        }
        group.wait()
        #expect(exporter.uids.count == 1)
        #expect(!FileManager.default.fileExists(atPath: dir.crashes + "/a.crash"))
    }

    @Test("A refused batch does not hold back the batches after it")
    func batches() throws {
        let dir = try TestSupport.reportsDirectory()
        let golden = try TestSupport.fixture("v1/sigsegv-null-depth12.crash")
        for i in 0..<(ReportCollector.batchSize + 5) { try TestSupport.write(golden, to: dir.crashes + "/c\(i).crash") }
        let exporter = InMemoryExporter()
        exporter.failNext(1)
        let delivery = ReportCollector(directory: dir).deliver(to: exporter, resource: Resource())
        #expect(delivery.exported == 5)
        #expect(delivery.exportError != nil)
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: dir.crashes).filter { $0.hasSuffix(".crash") }.count
                == ReportCollector.batchSize)
    }

    #if compiler(>=6.2)  // exit tests (#expect(processExitsWith:)) need Swift 6.2
    @Test("start() twice in one process: the first run is not taken for a dead one")
    func startTwice() async throws {
        let directory: String = TestSupport.childDirectory("twice")
        await #expect(processExitsWith: .success) { [directory = directory as String] in
            let exporter = InMemoryExporter()
            for version in ["1.0", "1.0"] {
                let config = Aftermath.Configuration(
                    serviceName: "twice", serviceVersion: version, exporter: exporter,
                    reportsDirectory: directory, deliverPendingReportsSynchronously: true)
                do { try Aftermath.start(config) } catch { exit(2) }
            }
            exit(exporter.records.contains { $0.eventName == "app.abnormal_exit" } ? 1 : 0)
        }
    }
    #endif

    /// The inode of path, or nil.
    static func inode(_ path: String) -> UInt64? {
        var st = stat()
        return lstat(path, &st) == 0 ? UInt64(st.st_ino) : nil
    }

    /// A first run (start, then exit) in a child: its crashes/ folder, the reserve it left
    /// there and the reserve's inode.
    static func firstRunsReserve(_ directory: String) async throws -> (String, String, UInt64) {
        await #expect(processExitsWith: .success) { [directory = directory as String] in
            StartAndDeliveryTests.startAndExit(directory)
        }
        let crashes = directory + "/crashes"
        let first = try #require(try FileManager.default.contentsOfDirectory(atPath: crashes).first)
        return (crashes, first, try #require(Self.inode(crashes + "/" + first)))
    }

    static func startAndExit(_ directory: String) {
        let config = Aftermath.Configuration(
            serviceName: "reserve", serviceVersion: "1", exporter: InMemoryExporter(),
            reportsDirectory: directory, deliverPendingReportsSynchronously: true)
        do { try Aftermath.start(config) } catch { exit(2) }
        exit(0)
    }

    @Test("A later launch takes over a dead run's empty crash reserve; a live run's and a written one are left")
    func reserveTakenOver() async throws {
        let directory: String = TestSupport.childDirectory("reserve-reuse")
        let (crashes, first, firstInode) = try await Self.firstRunsReserve(directory)
        // A live run's reserve (its lock held here) and a dead handler's half-written file.
        let live = crashes + "/" + String(repeating: "a", count: 32) + ".crash.tmp"
        let liveFD = open(live, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        #expect(liveFD >= 0 && flock(liveFD, LOCK_EX | LOCK_NB) == 0)
        defer { close(liveFD) }
        let written = crashes + "/" + String(repeating: "b", count: 32) + ".crash.tmp"
        try TestSupport.write(Array("AFTM torn".utf8), to: written)
        let writtenInode = Self.inode(written)
        await #expect(processExitsWith: .success) { [directory = directory as String] in
            StartAndDeliveryTests.startAndExit(directory)
        }
        let names = try FileManager.default.contentsOfDirectory(atPath: crashes)
        let taken = names.filter { Self.inode(crashes + "/" + $0) == firstInode }
        // Kept under its name (a crash's rename names the report): no new reserve was made.
        let reserves = names.filter {
            $0.hasSuffix(".crash.tmp") && crashes + "/" + $0 != live && crashes + "/" + $0 != written
        }
        #expect(taken == [first] && reserves == [first], "the first run's reserve is the second's now: \(names)")
        #expect(Self.inode(live) != nil, "a live run's reserve is never taken or removed")
        // The torn one is left to be salvaged: still there, or set aside with its reason.
        let rejected = (try? FileManager.default.contentsOfDirectory(atPath: directory + "/rejected")) ?? []
        #expect(Self.inode(written) == writtenInode || !rejected.isEmpty, "a written reserve is never reused")
        try? FileManager.default.removeItem(atPath: directory)
    }

    @Test("A dead run's reserve taken over as it is: its inode not changed when its mode is 0600, made 0600 when not")
    func reserveTakenWithoutMetadataWrite() async throws {
        let directory: String = TestSupport.childDirectory("reserve-mode")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let (crashes, first, firstInode) = try await Self.firstRunsReserve(directory)
        let path = crashes + "/" + first
        func status() -> stat? {
            var st = stat()
            return stat(path, &st) == 0 ? st : nil
        }
        let before = try #require(status())
        #expect(before.st_mode & 0o7777 == 0o600)
        usleep(20_000)  // past the file system's timestamp granularity
        await #expect(processExitsWith: .success) { [directory = directory as String] in
            StartAndDeliveryTests.startAndExit(directory)
        }
        let after = try #require(status())
        // Taken (the same inode is this run's reserve), and no change of mode written: a change
        // of mode, even to the same one, is a journal transaction at every start.
        #expect(after.st_ino == firstInode && after.st_mode & 0o7777 == 0o600)
        #expect(
            after.st_ctim.tv_sec == before.st_ctim.tv_sec && after.st_ctim.tv_nsec == before.st_ctim.tv_nsec,
            "the reserve's inode changed at its take-over")
        // One whose mode is not 0600 (an umask, a copy) is taken and made 0600.
        #expect(chmod(path, 0o640) == 0)
        await #expect(processExitsWith: .success) { [directory = directory as String] in
            StartAndDeliveryTests.startAndExit(directory)
        }
        let fixed = try #require(status())
        #expect(fixed.st_ino == firstInode && fixed.st_mode & 0o7777 == 0o600)
    }

    /// In a child: start, wait (2 s at most) until this run has made the next launch's spare
    /// run file, exit.
    static func startAndLeaveSpare(_ directory: String) {
        let config = Aftermath.Configuration(
            serviceName: "spare", serviceVersion: "1", exporter: InMemoryExporter(),
            reportsDirectory: directory, deliverPendingReportsSynchronously: true)
        do { try Aftermath.start(config) } catch { exit(2) }
        let spare = directory + "/runs/" + AFT_RUN_SPARE_FILE_NAME
        for _ in 0..<200 where inode(spare) == nil { usleep(10_000) }
        exit(inode(spare) == nil ? 3 : 0)
    }

    @Test(
        "A later launch's run file is the spare an earlier one made; a planted spare (a link, a written file) is never taken"
    )
    func spareRunFileTakenOver() async throws {
        let directory: String = TestSupport.childDirectory("spare-run")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        await #expect(processExitsWith: .success) { [directory = directory as String] in
            StartAndDeliveryTests.startAndLeaveSpare(directory)
        }
        let runs = directory + "/runs"
        let spare = runs + "/" + AFT_RUN_SPARE_FILE_NAME
        let spareInode = try #require(Self.inode(spare), "the first launch made a spare")
        await #expect(processExitsWith: .success) { [directory = directory as String] in
            StartAndDeliveryTests.startAndLeaveSpare(directory)
        }
        func runFiles() -> [String: UInt64] {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: runs)) ?? []
            return Dictionary(
                uniqueKeysWithValues: names.filter { $0.hasSuffix(".run") }.compactMap { name in
                    Self.inode(runs + "/" + name).map { (name, $0) }
                })
        }
        #expect(runFiles().values.contains(spareInode), "the second run's file is the first's spare: \(runFiles())")
        #expect(Self.inode(spare).map { $0 != spareInode } == true, "and the second made the next one")

        // A link in its place: never followed, never taken; a written spare: never taken.
        let target = directory + "/outside"
        try TestSupport.write([], to: target)
        unlink(spare)
        #expect(symlink(target, spare) == 0)
        await #expect(processExitsWith: .success) { [directory = directory as String] in
            StartAndDeliveryTests.startAndExit(directory)
        }
        var st = stat()
        #expect(stat(target, &st) == 0 && st.st_size == 0, "the link's target is untouched")
        unlink(spare)
        try TestSupport.write(Array("a run".utf8), to: spare)
        let writtenInode = try #require(Self.inode(spare))
        await #expect(processExitsWith: .success) { [directory = directory as String] in
            StartAndDeliveryTests.startAndExit(directory)
        }
        #expect(!runFiles().values.contains(writtenInode), "a written spare is never a run's file")
    }

    @Test(
        "The install's completion does not signal start's caller (its alternate stack is the install's); an older thread it asks"
    )
    func callerNotAskedForAlternateStack() async {
        let directory: String = TestSupport.childDirectory("altstack-caller")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        await #expect(processExitsWith: .success) { [directory = directory as String] in
            // A thread from before start, waiting in a loop a signal does not cut short.
            final class Box: @unchecked Sendable { var tid: UInt64 = 0 }
            let older = Box()
            let thread = Thread {
                older.tid = aft_gettid()
                while true {
                    for _ in 0..<1_000_000 { _ = older.tid &+ 1 }
                    sched_yield()
                }
            }
            thread.start()
            for _ in 0..<200 where older.tid == 0 { usleep(5_000) }
            let caller = aft_gettid()
            // The default: the completion on start's own thread, not the caller's.
            let config = Aftermath.Configuration(
                serviceName: "altstack", serviceVersion: "1", exporter: InMemoryExporter(),
                reportsDirectory: directory)
            do { try Aftermath.start(config) } catch { _exit(2) }
            // Running meanwhile, as an app's thread after start: a thread that would be asked.
            let until = Date().addingTimeInterval(5)
            while Aftermath.lastDelivery == nil && Date() < until {}
            guard aft_threads_alternate_stack_asked(caller) == 0 else { _exit(3) }
            _exit(aft_threads_alternate_stack_asked(older.tid) == 1 ? 0 : 4)
        }
    }

    @Test(
        "A thread of Aftermath's just made (its creator's name, every signal blocked) is neither asked for an alternate stack nor waited for"
    )
    func ownNewThreadsNotWaitedFor() async {
        let directory: String = TestSupport.childDirectory("altstack-own")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        await #expect(processExitsWith: .success) { [directory = directory as String] in
            // As start's delivery thread finds the pinger it has just made, before it runs.
            let own = aft_test_start_thread_as_aftermaths()
            guard own != 0 else { _exit(2) }
            ExitStatusTests.childStart(directory)
            aft_install_complete()
            // Asked again, it would hold the pass 0.4 s over five looks at the threads.
            guard aft_threads_alternate_stack_asked(own) == 0 else { _exit(3) }
            // Waited for, it would be asked in every round (5). A loaded machine may leave an
            // app thread still starting for a second look: the check is that not every round ran.
            let rounds = aft_threads_alternate_stack_rounds()
            _exit(rounds >= 1 && rounds < 5 ? 0 : 10 + min(rounds, 9))
        }
    }

    @Test(
        "An app whose only thread at start was its caller: no look at the threads for alternate stacks (later ones get theirs as they start); one that had another: it is asked"
    )
    func noThreadPassWhereCallerWasAlone() throws {
        let directory = try Tool.temporaryDirectory("altstack-alone") + "/reports"
        let harness = Tool.productsDirectory + "/exit-harness"
        let alone = try Tool.run(harness, ["child", "altstack-pass", directory])
        #expect(alone.status == 0 && alone.stdout.contains("ROUNDS 0 "), "\(alone.stdout) \(alone.stderr)")
        let withThread = try Tool.run(harness, ["child", "altstack-pass-thread", directory])
        let rounds = withThread.stdout.split(separator: " ").drop { $0 != "ROUNDS" }.dropFirst().first
        #expect(withThread.status == 0 && Int(rounds ?? "") ?? 0 >= 1, "\(withThread.stdout) \(withThread.stderr)")
        #expect(withThread.stdout.contains("ASKED 1"), "\(withThread.stdout)")
    }

    @Test("Aftermath's C threads (the watchdog, the run updater) get no malloc arena of their own")
    func noArenaForOwnThreads() async {
        let directory: String = TestSupport.childDirectory("arenas")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        await #expect(processExitsWith: .success) { [directory = directory as String] in
            let before = aft_test_malloc_arenas()
            var config = Aftermath.Configuration(
                serviceName: "arenas", serviceVersion: "1", exporter: InMemoryExporter(),
                reportsDirectory: directory, deliverPendingReportsSynchronously: true)
            // The watchdog and the run updater, C alone (the pinger runs the app's Swift).
            config.hangHeartbeat = .manual
            config.watchConcurrencyPool = false
            do { try Aftermath.start(config) } catch { _exit(2) }
            usleep(300_000)  // the threads started, the run updater's first sample taken
            // start's caller allocates in an arena it already has; the two threads, none.
            let added = aft_test_malloc_arenas() - before
            _exit(before > 0 && added <= 0 ? 0 : 10 + Int32(max(0, min(added, 9))))
        }
    }

    @Test("A service.version longer than its field is clipped once, the same in memory and on disk")
    func longValues() {
        let long = String(repeating: "1.2.3-beta+", count: 7) + "é"
        let config = Aftermath.Configuration(
            serviceName: String(repeating: "n", count: 300), serviceVersion: long,
            exporter: InMemoryExporter(), reportsDirectory: "/tmp/unused")
        let context = Aftermath.makeContext(config)
        #expect(context.serviceVersion.utf8.count <= 63)
        #expect(long.hasPrefix(context.serviceVersion))
        #expect(ReportContext(Aftermath.cContext(context)).serviceVersion == context.serviceVersion)
        #expect(ReportContext(Aftermath.cContext(context)).serviceName == context.serviceName)
    }

    #if compiler(>=6.2)  // exit tests (#expect(processExitsWith:)) need Swift 6.2
    @Test(
        "Delivery in the background (the default): start creates one thread; the hang watchdog and its pinger (which updates the run record) come from it, the unwinding helper later"
    )
    func backgroundThreads() async {
        await #expect(processExitsWith: .success) {
            guard let seen = StartAndDeliveryTests.startAndSettle("background-threads") else { exit(10) }
            // No unwinding helper's donor: the resident waits for a first hang. No run updater:
            // the pinger does its work.
            let names = seen
            guard names.isSuperset(of: ["aftermath.hang", "aftermath.ping"]), !names.contains("aftermath.unw"),
                !names.contains("aftermath.run")
            else { exit(12) }
            guard Aftermath.hangDetectionError == nil else { exit(13) }
            var stats = aft_watchdog_stats()
            aft_watchdog_get_stats(&stats)
            exit(stats.watchdog_tid != 0 ? 0 : 14)
        }
    }

    /// The process's threads now: their ids and names.
    static func threads() -> [(tid: String, name: String)] {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        return tasks.map {
            (
                $0,
                (try? String(contentsOfFile: "/proc/self/task/\($0)/comm", encoding: .utf8))?
                    .trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
            )
        }
    }

    /// Leaves a report pending in directory for the next start (a handled error recorded by a
    /// start that delivers on its caller and watches no hang), so that start's delivery is a full
    /// one. False when it could not.
    static func leaveReportPending(in directory: String, service: String) -> Bool {
        var first = Aftermath.Configuration(
            serviceName: service, serviceVersion: "1", exporter: InMemoryExporter(),
            reportsDirectory: directory, deliverPendingReportsSynchronously: true)
        first.hangHeartbeat = .off
        struct Recorded: Error {}
        return (try? Aftermath.start(first)) != nil && Aftermath.record(error: Recorded())
    }

    /// The names of the process's threads now.
    static func threadNames() -> [String] { threads().map(\.name) }

    /// In a child: starts Aftermath with its delivery in the background (the default), then
    /// waits (5 s at most each) for the delivery to end and for the watchdog's and the pinger's
    /// threads to have named themselves, as each does when it begins (on a loaded machine one
    /// may not have run yet). The thread names seen then; nil when start failed or the delivery
    /// did not end.
    static func startAndSettle(_ name: String) -> Set<String>? {
        let config = Aftermath.Configuration(
            serviceName: name, serviceVersion: "1", exporter: InMemoryExporter(),
            reportsDirectory: TestSupport.childDirectory(name))
        do { try Aftermath.start(config) } catch { return nil }
        for _ in 0..<500 where Aftermath.lastDelivery == nil { usleep(10_000) }
        guard Aftermath.lastDelivery != nil else { return nil }
        var seen = Set(threadNames())
        for _ in 0..<500 where !seen.isSuperset(of: ["aftermath.hang", "aftermath.ping"]) {
            usleep(10_000)
            seen = Set(threadNames())
        }
        return seen
    }

    /// The watchdog's counters once its thread and its pinger have both begun (5 s at most).
    static func settledStats() -> aft_watchdog_stats? {
        var stats = aft_watchdog_stats()
        for _ in 0..<500 {
            aft_watchdog_get_stats(&stats)
            if stats.watchdog_tid != 0, stats.pinger_tid != 0 { return stats }
            usleep(10_000)
        }
        return nil
    }

    @Test(
        "Nothing pending: start's delivery thread becomes the pinger (made before the watchdog's thread, it has the lower id), and a second start's stop ends it"
    )
    func deliveryThreadBecomesPinger() async {
        await #expect(processExitsWith: .success) {
            func config(_ name: String) -> Aftermath.Configuration {
                var c = Aftermath.Configuration(
                    serviceName: "pinger-adopted", serviceVersion: "1", exporter: InMemoryExporter(),
                    reportsDirectory: TestSupport.childDirectory("pinger-adopted"))
                c.watchConcurrencyPool = false
                return c
            }
            do { try Aftermath.start(config("a")) } catch { exit(10) }
            guard let first = StartAndDeliveryTests.settledStats() else { exit(11) }
            guard Aftermath.lastDelivery != nil else { exit(12) }
            // tids are given in order: a pinger of its own comes after the watchdog's thread.
            guard first.pinger_tid < first.watchdog_tid else { exit(13) }
            guard !StartAndDeliveryTests.threadNames().contains("aftermath.deliv") else { exit(14) }
            // A second start stops the first watchdog (the adopted pinger leaves its loop and its
            // thread ends) and its own delivery thread takes the role again.
            do { try Aftermath.start(config("b")) } catch { exit(15) }
            var second = aft_watchdog_stats()
            for _ in 0..<500 {
                aft_watchdog_get_stats(&second)
                if second.pinger_tid != 0, second.pinger_tid != first.pinger_tid,
                    StartAndDeliveryTests.threadNames().filter({ $0 == "aftermath.ping" }).count == 1,
                    access("/proc/self/task/\(first.pinger_tid)", F_OK) != 0
                {
                    break
                }
                usleep(10_000)
            }
            guard second.pinger_tid != 0, second.pinger_tid != first.pinger_tid else { exit(16) }
            guard StartAndDeliveryTests.threadNames().filter({ $0 == "aftermath.ping" }).count == 1 else { exit(17) }
            guard access("/proc/self/task/\(first.pinger_tid)", F_OK) != 0 else { exit(18) }  // it ended
            exit(0)
        }
    }

    @Test(
        "Hangs not watched, nothing pending: start's delivery thread becomes the run record's updater (it waits on the delivery's own stack)"
    )
    func deliveryThreadBecomesUpdater() async {
        await #expect(processExitsWith: .success) {
            var c = Aftermath.Configuration(
                serviceName: "updater-adopted", serviceVersion: "1", exporter: InMemoryExporter(),
                reportsDirectory: TestSupport.childDirectory("updater-adopted"))
            c.hangHeartbeat = .off
            c.hangOtherThreads = false
            c.watchConcurrencyPool = false
            do { try Aftermath.start(c) } catch { exit(10) }
            let stack = UInt64(aft_own_stack_address())
            guard stack != 0 else { exit(11) }  // the delivery thread runs on a stack of its own
            // The updater, once it waits: its stack pointer, from its system call file.
            for _ in 0..<500 {
                for (tid, name) in StartAndDeliveryTests.threads() {
                    guard name == "aftermath.run",
                        let line = try? String(contentsOfFile: "/proc/self/task/\(tid)/syscall", encoding: .utf8)
                    else { continue }
                    let fields = line.split(separator: " ")
                    guard fields.count >= 3, let sp = UInt64(fields[fields.count - 2].dropFirst(2), radix: 16) else {
                        continue
                    }
                    exit(sp > stack && sp < stack + 64 * 1024 * 1024 ? 0 : 12)
                }
                usleep(10_000)
            }
            exit(13)  // no updater
        }
    }

    @Test(
        "Starts in quick succession, each while the last one's delivery thread may still be about to take the pinger's role: one pinger and one watchdog at the end, no stop waits for ever"
    )
    func quickRestartsLeaveOnePinger() async {
        await #expect(processExitsWith: .success) {
            for i in 0..<20 {
                var c = Aftermath.Configuration(
                    serviceName: "pinger-restarts", serviceVersion: "\(i)", exporter: InMemoryExporter(),
                    reportsDirectory: TestSupport.childDirectory("pinger-restarts"))
                c.watchConcurrencyPool = false
                do { try Aftermath.start(c) } catch { exit(10) }
                if i % 3 == 0 { usleep(UInt32(i) * 100) }
            }
            guard StartAndDeliveryTests.settledStats() != nil else { exit(11) }
            // The delivery threads of the earlier starts end; one pinger remains.
            var names = StartAndDeliveryTests.threadNames()
            for _ in 0..<500 {
                names = StartAndDeliveryTests.threadNames()
                if names.filter({ $0 == "aftermath.ping" }).count == 1, !names.contains("aftermath.deliv") { break }
                usleep(10_000)
            }
            guard names.filter({ $0 == "aftermath.ping" }).count == 1 else { exit(12) }
            guard names.filter({ $0 == "aftermath.hang" }).count == 1 else { exit(13) }
            guard !names.contains("aftermath.deliv") else { exit(14) }
            exit(0)
        }
    }

    @Test("Reports pending: the pinger is a thread of its own, made before the delivery, which may take long")
    func pendingDeliveryHasItsOwnPinger() async {
        await #expect(processExitsWith: .success) {
            let directory = TestSupport.childDirectory("pinger-own-thread")
            guard StartAndDeliveryTests.leaveReportPending(in: directory, service: "pinger-own-thread") else {
                exit(11)
            }
            final class Holding: LogExporter, @unchecked Sendable {
                let entered = DispatchSemaphore(value: 0)
                let release = DispatchSemaphore(value: 0)
                func export(_ batch: LogBatch) throws {
                    entered.signal()
                    release.wait()
                }
            }
            let holding = Holding()
            var second = Aftermath.Configuration(
                serviceName: "pinger-own-thread", serviceVersion: "1", exporter: holding, reportsDirectory: directory)
            second.watchConcurrencyPool = false
            do { try Aftermath.start(second) } catch { exit(12) }
            guard holding.entered.wait(timeout: .now() + 10) == .success else { exit(13) }
            // The delivery waits in the exporter: the pinger is another thread, and it pings.
            guard let stats = StartAndDeliveryTests.settledStats() else { exit(14) }
            guard stats.pinger_tid > stats.watchdog_tid else { exit(15) }
            holding.release.signal()
            exit(0)
        }
    }

    @Test("A crash right after start: the delivery thread starts no thread while it is written")
    func crashRightAfterStart() async {
        await #expect(processExitsWith: .exitCode(20)) {
            // One CPU: the delivery thread runs only where the crash's handler blocks.
            guard aft_test_run_on_one_cpu() == 0 else { exit(10) }
            // The app's own handler, chained to once the crash is written: it waits 300 ms, then
            // ends the process with 20 plus the threads Aftermath started meanwhile.
            guard aft_test_install_thread_counting_handler(300) == 0 else { exit(11) }
            let config = Aftermath.Configuration(
                serviceName: "crash-at-start", serviceVersion: "1", exporter: InMemoryExporter(),
                reportsDirectory: TestSupport.childDirectory("crash-at-start"))
            do { try Aftermath.start(config) } catch { exit(12) }
            raise(SIGSEGV)
            exit(13)
        }
    }
    #endif
}

extension StartAndDeliveryTests {
    @Test("A dead run's reserve is found and taken among 300 other files of crashes/ (a listing of many reads)")
    func reserveTakenAmongManyFiles() async throws {
        let directory: String = TestSupport.childDirectory("reserve-many")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let (crashes, first, firstInode) = try await Self.firstRunsReserve(directory)
        // Names that are not reserves, listed before and around it: skipped, never counted
        // among the reserves examined.
        for i in 0..<300 {
            try TestSupport.write(
                [], to: crashes + "/" + String(format: "%03d-", i) + String(repeating: "x", count: 40) + ".note")
        }
        await #expect(processExitsWith: .success) { [directory = directory as String] in
            StartAndDeliveryTests.startAndExit(directory)
        }
        let reserves = try FileManager.default.contentsOfDirectory(atPath: crashes).filter {
            $0.hasSuffix(".crash.tmp")
        }
        #expect(reserves == [first] && Self.inode(crashes + "/" + first) == firstInode, "\(reserves)")
    }
}
