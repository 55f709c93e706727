import CSignalShim
import Foundation
import Testing
import Aftermath
import AftermathNextLaunch
import AftermathOTLP
import AftermathTesting
import CHarnessFaults
import TestSupport

#if compiler(>=6.2)  // exit tests (#expect(processExitsWith:)) need Swift 6.2
/// Capture where hardened services and containers run apps: system calls refused by seccomp.
/// The app starts, the crash is reported whole, and the process dies as it would have.
@Suite("Hostile environments")
struct HostileEnvironmentTests {
    /// The one crash a hostile child left: its record and images. It must still carry the
    /// build ids of the main executable (equal to app.build_id) and of libc.
    static func onlyCrash(_ directory: String, allImages: Bool = true) throws -> (LogRecord, CrashReport) {
        let exporter = InMemoryExporter()
        let collector = ReportCollector(directory: ReportDirectory(root: directory))
        let pending = collector.collect(moveRejected: false)
        #expect(pending.rejected.isEmpty)
        let crash = try #require(pending.reports.compactMap(\.crash).first)
        _ = collector.deliver(to: exporter, resource: Resource())
        let crashes = exporter.records.filter { $0.eventName == "app.crash" }
        #expect(crashes.count == 1)
        let record = try #require(crashes.first)
        let appBuildID = try #require(record[attribute: "app.build_id"]?.stringValue)
        #expect(appBuildID.count == 40, "app.build_id '\(appBuildID)'")
        let main = try #require(crash.images.first { $0.isMainExecutable })
        #expect(main.buildID == appBuildID)
        let libc = try #require(crash.images.first { $0.name.hasPrefix("libc.so") })
        #expect(libc.buildID.count == 40, "libc build_id '\(libc.buildID)'")
        if allImages { #expect(crash.images.contains { $0.isVDSO && !$0.buildID.isEmpty }, "the vdso's build id") }
        return (record, crash)
    }

    @Test(
        "seccomp refusing process_vm_readv (kill, EPERM): starts, reports with build ids, same death",
        arguments: [1, 0])
    func seccompProcessVMReadv(_ kill: Int32) async throws {
        let directory: String = TestSupport.childDirectory("seccomp-\(kill)")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        await #expect(processExitsWith: .signal(SIGSEGV)) { [directory = directory as String, kill = kill as Int32] in
            guard aft_test_refuse_process_vm_readv(kill) == 0 else { _exit(97) }
            ExitStatusTests.childStart(directory)
            UnsafeMutablePointer<Int>(bitPattern: 8)!.pointee = 1
        }
        let (record, _) = try Self.onlyCrash(directory)
        #expect(record[attribute: "exception.type"]?.stringValue == "SIGSEGV (SEGV_MAPERR)")
    }
}

/// The crash path reads memory through a descriptor of /proc/self/mem opened at start. An app
/// that closes every descriptor (daemons do) and opens files that take the same numbers must
/// not make it read those files as memory; without /proc it falls back to a pipe.
@Suite("Memory reader")
struct MemoryReaderTests {
    /// The descriptor numbers open on this process's /proc/<pid>/mem.
    static func memDescriptors() -> [Int32] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return entries.compactMap { name -> Int32? in
            guard let fd = Int32(name),
                let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(name)")
            else { return nil }
            return target == "/proc/\(getpid())/mem" ? fd : nil
        }
    }

    /// libc's build id as read now from memory, and as the image was seen at start.
    static func libcBuildIDs() -> (now: [UInt8], atStart: [UInt8]) {
        var images = [aft_image](repeating: aft_image(), count: Int(AFT_MAX_IMAGES))
        let n = Int(aft_installed_images(&images, UInt32(images.count)))
        guard let libc = images.prefix(n).map(LoadedImage.init).first(where: { $0.name.hasPrefix("libc.so") }) else {
            return ([], [])
        }
        var out = [UInt8](repeating: 0, count: Int(AFT_BUILD_ID_CAPACITY))
        var bias: UInt64 = 0
        let size = Int(aft_build_id_at(libc.start, &out, UInt32(out.count), &bias, nil))
        return (Array(out.prefix(size)), Hex.decode(libc.buildID) ?? [])
    }

    /// The pipes open in this process, by inode.
    static func pipes() -> Set<String> {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return Set(
            entries.compactMap { try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\($0)") }
                .filter { $0.hasPrefix("pipe:") })
    }

    @Test("While /proc/self/mem reads, no pipe of the fallback's is held open")
    func noIdlePipe() async {
        let directory: String = TestSupport.childDirectory("memfd-pipes")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        await #expect(processExitsWith: .success) { [directory = directory as String] in
            let before = MemoryReaderTests.pipes()
            let config = Aftermath.Configuration(
                serviceName: "pipes", serviceVersion: "1", exporter: InMemoryExporter(),
                reportsDirectory: directory, deliverPendingReportsSynchronously: true)
            do { try Aftermath.start(config) } catch { _exit(10) }
            // libunwind's own (it checks addresses with a pipe of its own) may be there.
            let added = MemoryReaderTests.pipes().subtracting(before)
            guard !MemoryReaderTests.memDescriptors().isEmpty, added.count <= 1 else { _exit(11) }
            let ids = MemoryReaderTests.libcBuildIDs()
            _exit(ids.now.count == 20 && ids.now == ids.atStart ? 0 : 12)
        }
    }

    @Test("The app closes the descriptor and /dev/zero takes its number: memory is still memory")
    func reusedDescriptor() async {
        let directory: String = TestSupport.childDirectory("memfd-reuse")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        await #expect(processExitsWith: .success) { [directory = directory as String] in
            ExitStatusTests.childStart(directory)
            // start's own thread done first: a descriptor it opened meanwhile would take the number.
            aft_install_complete()
            for _ in 0..<500 where Aftermath.lastDelivery == nil { usleep(10_000) }
            let fds = MemoryReaderTests.memDescriptors()
            guard !fds.isEmpty else { _exit(10) }
            for fd in fds {
                // dup2 closes the number and gives it to /dev/zero at once: a close, then an
                // open, let Aftermath's other threads (the run's updater reads /proc) take it.
                let zero = open("/dev/zero", O_RDONLY)
                guard zero >= 0, dup2(zero, fd) == fd else { _exit(11) }
                close(zero)
            }
            let ids = MemoryReaderTests.libcBuildIDs()
            guard ids.now.count == 20, ids.now == ids.atStart else { _exit(12) }
            _exit(0)
        }
    }

    @Test(
        "Without /proc (unmounted after start, descriptor closed): the pipe fallback reads memory",
        .enabled(if: getuid() == 0, "a mount namespace needs root (CI runs as root)"))
    func withoutProc() async {
        let directory: String = TestSupport.childDirectory("memfd-noproc")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        await #expect(processExitsWith: .success) { [directory = directory as String] in
            ExitStatusTests.childStart(directory)
            let fds = MemoryReaderTests.memDescriptors()
            guard !fds.isEmpty else { _exit(10) }
            guard aft_test_hide_proc() == 0 else { _exit(11) }
            fds.forEach { close($0) }
            guard open("/proc/self/mem", O_RDONLY) < 0 else { _exit(12) }
            let ids = MemoryReaderTests.libcBuildIDs()
            guard ids.now.count == 20, ids.now == ids.atStart else { _exit(13) }
            _exit(0)
        }
    }

    @Test(
        "Without /proc from before start (a container or chroot without it): every image and its build id in the report",
        .enabled(if: getuid() == 0, "a mount namespace needs root (CI runs as root)"))
    func noProcAtStart() async throws {
        let directory: String = TestSupport.childDirectory("noproc-start")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        await #expect(processExitsWith: .signal(SIGSEGV)) { [directory = directory as String] in
            guard aft_test_hide_proc() == 0 else { _exit(11) }
            guard open("/proc/self/maps", O_RDONLY) < 0 else { _exit(12) }
            ExitStatusTests.childStart(directory)
            aft_install_complete()  // the images read, as a running app has them
            UnsafeMutablePointer<Int>(bitPattern: 8)!.pointee = 1
        }
        let (_, crash) = try HostileEnvironmentTests.onlyCrash(directory)
        #expect(crash.images.count > 5, "\(crash.images.map(\.path))")
        #expect(crash.images.allSatisfy { !$0.buildID.isEmpty }, "\(crash.images.map { ($0.path, $0.buildID) })")
        #expect(crash.images.allSatisfy { $0.isVDSO || $0.path.hasPrefix("/") })
    }
}

/// A file-size limit (`ulimit -f`): writing past it raises SIGXFSZ, whose default action ends
/// the process. Aftermath's writes must never end the app, nor change how it dies.
@Suite("File-size limit")
struct FileSizeLimitTests {
    /// Limits the child's file size, with SIGXFSZ's default action (the exit-test thread may
    /// inherit it blocked; an app's thread has it unblocked).
    static func limitFileSize(_ bytes: UInt64) {
        var limit = rlimit(rlim_cur: rlim_t(bytes), rlim_max: rlim_t(bytes))
        guard setrlimit(__rlimit_resource_t(RLIMIT_FSIZE.rawValue), &limit) == 0 else { _exit(96) }
        signal(SIGXFSZ, SIG_DFL)
        var unblock = sigset_t()
        sigemptyset(&unblock)
        sigaddset(&unblock, SIGXFSZ)
        pthread_sigmask(SIG_UNBLOCK, &unblock, nil)
    }

    @Test("ulimit -f 8: a null dereference dies by SIGSEGV and leaves a whole report that fits")
    func smallLimit() async throws {
        let directory: String = TestSupport.childDirectory("fsize-8")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        await #expect(processExitsWith: .signal(SIGSEGV)) { [directory = directory as String] in
            FileSizeLimitTests.limitFileSize(8 * 1024)
            ExitStatusTests.childStart(directory)
            UnsafeMutablePointer<Int>(bitPattern: 8)!.pointee = 1
        }
        let (record, crash) = try HostileEnvironmentTests.onlyCrash(directory, allImages: false)
        #expect(record[attribute: "exception.type"]?.stringValue == "SIGSEGV (SEGV_MAPERR)")
        #expect(!crash.isPartial, "committed, not salvaged")
        #expect(crash.frames.count > 3)
        #expect(crash.imagesTruncated, "the images that did not fit are said to be missing")
        let named = try FileManager.default.contentsOfDirectory(atPath: directory + "/crashes").filter {
            $0.hasSuffix(".crash")
        }
        #expect(named.isEmpty, "delivered and removed")
    }

    @Test("ulimit -f 8 set after start, below the size the crash file was given: a whole report that fits")
    func limitAfterStart() async throws {
        let directory: String = TestSupport.childDirectory("fsize-after")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        await #expect(processExitsWith: .signal(SIGSEGV)) { [directory = directory as String] in
            ExitStatusTests.childStart(directory)
            aft_install_complete()  // the reserve sized and cached, as a running app has it
            FileSizeLimitTests.limitFileSize(8 * 1024)
            UnsafeMutablePointer<Int>(bitPattern: 8)!.pointee = 1
        }
        let (_, crash) = try HostileEnvironmentTests.onlyCrash(directory, allImages: false)
        #expect(!crash.isPartial, "committed at its own size, not the reserve's")
        #expect(crash.frames.count > 3)
        #expect(crash.imagesTruncated, "the images that did not fit are said to be missing")
    }

    @Test("ulimit -f 0: start, a recorded error and a crash never end the app by SIGXFSZ")
    func zeroLimit() async throws {
        let directory: String = TestSupport.childDirectory("fsize-0")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        await #expect(processExitsWith: .exitCode(7)) { [directory = directory as String] in
            FileSizeLimitTests.limitFileSize(0)
            ExitStatusTests.childStart(directory)
            struct Failure: Error {}
            _ = Aftermath.record(error: Failure())
            _ = Aftermath.startNewSession()
            sleep(1)  // the watchdog's and the delivery thread's first writes
            _exit(7)
        }
        await #expect(processExitsWith: .signal(SIGSEGV)) { [directory = directory as String] in
            FileSizeLimitTests.limitFileSize(0)
            ExitStatusTests.childStart(directory)
            UnsafeMutablePointer<Int>(bitPattern: 8)!.pointee = 1
        }
    }
}

/// Apps install their own crash handlers that chain to the one they replaced, and may call
/// start again: any order must end in the original signal at once, with one report.
@Suite("Other handlers")
struct OtherHandlerTests {
    /// "s" starts Aftermath, "a" installs an app handler chaining to the previous one (a fresh
    /// function each time), "n" one that calls the previous with NULL siginfo and context.
    @Test(
        "Installs and re-installs in any order end in SIGSEGV within a second, with a report",
        arguments: ["sas", "ssa", "ass", "sasa", "sasas", "asas", "san", "sns", "nss"])
    func orders(_ steps: String) async throws {
        let directory: String = TestSupport.childDirectory("handlers-\(steps)")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        await #expect(processExitsWith: .signal(SIGSEGV)) {
            [directory = directory as String, steps = steps as String] in
            var slot: Int32 = 0
            for step in steps {
                if step == "s" {
                    ExitStatusTests.childStart(directory)
                } else {
                    guard aft_test_install_chaining_handler(slot, SIGSEGV, step == "n" ? 1 : 0) == 0 else { _exit(95) }
                    slot += 1
                }
            }
            alarm(1)  // the bound: a loop, or a death later than a second, ends by SIGALRM instead
            UnsafeMutablePointer<Int>(bitPattern: 8)!.pointee = 1
        }
        let (record, _) = try HostileEnvironmentTests.onlyCrash(directory)
        #expect(record[attribute: "exception.type"]?.stringValue?.hasPrefix("SIGSEGV") == true)
    }
}
#endif
