import Aftermath
import AftermathNextLaunch
import AftermathOTLP
import AftermathTesting
import CSignalShim
import CHarnessFaults
import HarnessSupport
import TestSupport
import Foundation
import Synchronization
import Testing

#if compiler(>=6.2)  // exit tests (#expect(processExitsWith:)) need Swift 6.2
/// The process dies exactly as it would have without Aftermath (same signal), and leaves a
/// crash file that the next launch reports. Each case crashes a real child process.
@Suite("Exit status matrix")
struct ExitStatusTests {
    /// Ways to die: the shared faults, signals sent to the thread itself, and faults on a
    /// secondary thread. Each with the signal the process must die of.
    enum Death: String, CaseIterable, Sendable {
        case nullDereference, abort, illegalInstruction, divideByZero, breakpoint, sentBus, sentSys, secondaryThread
        case threadStackOverflow

        /// The fault, for the cases that are one.
        var fault: Fault? {
            switch self {
            case .nullDereference, .secondaryThread: .nullDereference
            case .abort: .abort
            case .illegalInstruction: .illegalInstruction
            case .divideByZero: .integerDivisionByZero
            case .breakpoint: .breakpoint
            case .threadStackOverflow: .stackOverflow
            case .sentBus, .sentSys: nil
            }
        }

        var signal: Int32 {
            switch self {
            case .sentBus: SIGBUS
            case .sentSys: SIGSYS
            default: fault?.signal ?? 0
            }
        }

        /// Dies; never returns.
        func trigger() -> Never {
            switch self {
            case .sentBus, .sentSys: pthread_kill(pthread_self(), signal)
            case .secondaryThread:
                let thread = Thread { _ = Fault.nullDereference.trigger() }
                thread.start()
                sleep(10)
            case .threadStackOverflow:
                // Without an alternate stack on this thread the kernel could not deliver the
                // signal at all: Aftermath gives every thread created after start one.
                var attributes = pthread_attr_t()
                pthread_attr_init(&attributes)
                pthread_attr_setstacksize(&attributes, 256 * 1024)
                var thread = pthread_t()
                pthread_create(
                    &thread, &attributes,
                    { _ in
                        _ = Fault.stackOverflow.trigger()
                        return nil
                    }, nil)
                sleep(10)
            default:
                _ = fault?.trigger()
            }
            sleep(5)
            _exit(99)  // not reached when the fault kills the process
        }
    }

    /// Starts Aftermath in a child. Its exporter never acknowledges, so the child's own
    /// background delivery cannot take away a report the test reads afterwards (a forked
    /// grandchild's crash is a dead process's report the child would otherwise deliver).
    static func childStart(_ directory: String) {
        let refusing = InMemoryExporter()
        refusing.failNext(Int.max)
        let config = Aftermath.Configuration(
            serviceName: "exit-tests", serviceVersion: "9.9.9",
            exporter: refusing, reportsDirectory: directory,
            fsyncReports: false)
        do { try Aftermath.start(config) } catch { _exit(98) }
    }

    @Test("Same signal with and without Aftermath, and a crash file that decodes", arguments: Death.allCases)
    func matrix(_ fault: Death) async throws {
        let directory: String = TestSupport.childDirectory("exit-\(fault.rawValue)")
        let faultName: String = fault.rawValue
        let expected = ExitTest.Condition.signal(fault.signal)
        await #expect(processExitsWith: expected) { [faultName = faultName as String] in
            Death(rawValue: faultName)!.trigger()
        }
        await #expect(processExitsWith: expected) {
            [directory = directory as String, faultName = faultName as String] in
            ExitStatusTests.childStart(directory)
            Death(rawValue: faultName)!.trigger()
        }
        let exporter = InMemoryExporter()
        let delivery = ReportCollector(directory: ReportDirectory(root: directory)).deliver(
            to: exporter, resource: Resource())
        #expect(delivery.rejected.isEmpty)
        let crashes = exporter.records.filter { $0.eventName == "app.crash" }
        let record = try #require(crashes.first)
        #expect(crashes.count == 1)
        #expect(!exporter.records.contains { $0.eventName == "apsio.hang" }, "a crash is not a hang")
        let type = try #require(record[attribute: "exception.type"]?.stringValue)
        #expect(type.hasPrefix(SignalDescription.name(fault.signal) + " ("))
        #expect(record[attribute: "service.version"]?.stringValue == "9.9.9")
        if fault == .threadStackOverflow {
            let message = record[attribute: "exception.message"]?.stringValue ?? ""
            #expect(message.hasPrefix("Stack overflow"), "\(message)")
            let frames = record[attribute: "exception.stacktrace"]?.stringValue?.split(separator: "\n").count ?? 0
            #expect(frames > 1000, "the overflowing thread's stack, \(frames) frames")
        }
        if fault == .secondaryThread || fault == .threadStackOverflow {
            // (Exit-test bodies do not run on the child's first thread, so only this case
            // can assert the thread.)
            #expect(record[attribute: "apsio.crash.main_thread"]?.boolValue == false)
        }
        if fault == .sentBus || fault == .sentSys || fault == .abort {
            #expect(record[attribute: "apsio.crash.sender_pid"]?.intValue != nil, "a sent signal names its sender")
        }
        let remaining = try FileManager.default.contentsOfDirectory(atPath: directory + "/crashes")
        #expect(
            remaining.allSatisfy { $0.hasSuffix(".crash.tmp") }, "only the (empty) reserve of the dead run may be left")
        try? FileManager.default.removeItem(atPath: directory)
    }
}

/// A fault inside the crash handler itself must neither hang nor loop, and must not change how
/// the process dies: the writer is abandoned, the original crash is chained; what the handler
/// had flushed is salvaged and marked.
@Suite("Fault inside the handler")
struct HandlerFaultTests {
    @Test("A different signal inside the handler: the process dies of the original crash")
    func nestedFault() async throws {
        let directory: String = TestSupport.childDirectory("nested")
        // The app's crash is SIGILL; the handler then faults with SIGSEGV while writing.
        await #expect(processExitsWith: .signal(SIGILL)) { [directory = directory as String] in
            ExitStatusTests.childStart(directory)
            aft_test_fault_inside_handler(1)
            aft_test_illegal_instruction()
        }
        let collection = ReportCollector(directory: ReportDirectory(root: directory)).collect()
        let crash = try #require(collection.reports.first?.crash)
        #expect(crash.isPartial)
        #expect(crash.signal == SIGILL, "the original crash, as far as it was written")
        #expect(!crash.frames.isEmpty)
        #expect(crash.handlerFaulted)
        try? FileManager.default.removeItem(atPath: directory)
    }

    @Test("The same signal inside the handler: the kernel ends the process, no hang")
    func sameSignal() async throws {
        let directory: String = TestSupport.childDirectory("nested-same")
        await #expect(processExitsWith: .signal(SIGSEGV)) { [directory = directory as String] in
            ExitStatusTests.childStart(directory)
            aft_test_fault_inside_handler(1)
            UnsafeMutablePointer<Int>(bitPattern: 8)!.pointee = 1
        }
        let crash = try #require(
            ReportCollector(directory: ReportDirectory(root: directory)).collect().reports.first?.crash)
        #expect(crash.isPartial && crash.signal == SIGSEGV)
        try? FileManager.default.removeItem(atPath: directory)
    }
}

/// Images loaded after start (dlopen) are not in the install-time snapshot: the handler sees
/// the loader's list changed and reads /proc/self/maps instead.
@Suite("Images loaded after start")
struct LateImageTests {
    @Test("A library dlopen'ed after start is in the crash's images, with its build id")
    func dlopenAfterStart() async throws {
        let directory: String = TestSupport.childDirectory("dlopen")
        await #expect(processExitsWith: .signal(SIGSEGV)) { [directory = directory as String] in
            ExitStatusTests.childStart(directory)
            guard dlopen("libBrokenLocale.so.1", RTLD_NOW) != nil else { _exit(97) }
            UnsafeMutablePointer<Int>(bitPattern: 8)!.pointee = 1
        }
        let crash = try #require(
            ReportCollector(directory: ReportDirectory(root: directory)).collect().reports.first?.crash)
        let late = try #require(crash.images.first { $0.name.hasPrefix("libBrokenLocale.so") })
        #expect(late.buildID.count == 40)
        try? FileManager.default.removeItem(atPath: directory)
    }

    @Test("Without a dlopen the install-time images are used, and they match the process")
    func snapshot() async throws {
        let directory: String = TestSupport.childDirectory("snapshot")
        await #expect(processExitsWith: .signal(SIGSEGV)) { [directory = directory as String] in
            ExitStatusTests.childStart(directory)
            UnsafeMutablePointer<Int>(bitPattern: 8)!.pointee = 1
        }
        let crash = try #require(
            ReportCollector(directory: ReportDirectory(root: directory)).collect().reports.first?.crash)
        #expect(crash.images.contains { $0.isMainExecutable && $0.buildID == crash.context.appBuildID })
        #expect(crash.images.contains { $0.name == "libc.so.6" })
        #expect(!crash.images.contains { $0.name.hasPrefix("libBrokenLocale.so") })
        try? FileManager.default.removeItem(atPath: directory)
    }
}

/// Opens the gate for the threads of the concurrent-crash test all at once.
let raceGate = Atomic<Int>(0)

/// Dispositions around the crash: forks, ignored signals, forced signals.
@Suite("Signal dispositions")
struct DispositionTests {
    static func collect(_ directory: String) -> [CrashReport] {
        ReportCollector(directory: ReportDirectory(root: directory)).collect().reports.compactMap(\.crash)
    }

    @Test("A forked child's crash and its parent's: two whole reports, neither overwrites the other")
    func forkedChild() async throws {
        let directory: String = TestSupport.childDirectory("fork")
        await #expect(processExitsWith: .signal(SIGILL)) { [directory = directory as String] in
            ExitStatusTests.childStart(directory)
            let pid = fork()
            if pid == 0 { UnsafeMutablePointer<Int>(bitPattern: 8)!.pointee = 1 }
            var status: Int32 = 0
            waitpid(pid, &status, 0)
            aft_test_illegal_instruction()
        }
        let crashes = Self.collect(directory)
        #expect(crashes.count == 2)
        #expect(Set(crashes.map(\.signal)) == [SIGSEGV, SIGILL])
        #expect(crashes.allSatisfy { !$0.isPartial })
        #expect(Set(crashes.map(\.context.reportID)).count == 2)
        #expect(Set(crashes.map(\.context.pid)).count == 2, "each report names the process that crashed")
        // The parent's stack unwound by libunwind at the next launch from the stack in its
        // file; the child's (the parent's crash reserve is not its own) in its handler, by frame
        // pointers: libunwind, loaded at its first use, never was in the parent.
        let parent = try #require(crashes.first { $0.signal == SIGILL })
        let child = try #require(crashes.first { $0.signal == SIGSEGV })
        #expect(parent.unwinder == .libunwind && parent.unwoundAtNextLaunch && parent.unwindStatus == .complete)
        #expect(child.unwinder == .framePointer && child.frames.count > 3)
        // Each lists its own threads: the child has one, the parent's are not its.
        #expect(child.threads.count == 1 && child.threads.first?.id == child.threadID)
        #expect(parent.threads.count > 1 && !parent.threads.contains { $0.id == child.threadID })
        try? FileManager.default.removeItem(atPath: directory)
    }

    @Test("Eight threads crash at once: one report (the first thread wins), the process dies of it")
    func concurrentCrashes() async throws {
        let directory: String = TestSupport.childDirectory("race")
        await #expect(processExitsWith: .signal(SIGSEGV)) { [directory = directory as String] in
            ExitStatusTests.childStart(directory)
            for _ in 0..<8 {
                Thread.detachNewThread {
                    while raceGate.load(ordering: .acquiring) == 0 {}
                    UnsafeMutablePointer<Int>(bitPattern: 8)!.pointee = 1
                }
            }
            usleep(50_000)
            raceGate.store(1, ordering: .releasing)
            sleep(10)
        }
        let crashes = Self.collect(directory)
        #expect(crashes.count == 1)
        #expect(crashes.first.map { !$0.isPartial && !$0.isMainThread } == true)
        try? FileManager.default.removeItem(atPath: directory)
    }

    @Test("A trap the app handles and lives through is no crash: withdrawn, and a later crash is reported")
    func survivedSignals() async throws {
        let directory: String = TestSupport.childDirectory("survive")
        await #expect(processExitsWith: .signal(SIGSEGV)) { [directory = directory as String] in
            var handled = sigaction()
            handled.__sigaction_handler.sa_handler = { _ in }
            sigaction(SIGTRAP, &handled, nil)
            ExitStatusTests.childStart(directory)
            raise(SIGTRAP)  // sent: re-raised to the app's handler, which returns
            aft_test_breakpoint()  // the kernel's: handed to the app's handler, which returns
            UnsafeMutablePointer<Int>(bitPattern: 8)!.pointee = 1
        }
        // The withdrawn report is gone, reserve and all: the later crash's file alone.
        #expect((try? FileManager.default.contentsOfDirectory(atPath: directory + "/crashes"))?.count == 1)
        #expect(Self.collect(directory).map(\.signal) == [SIGSEGV])
        try? FileManager.default.removeItem(atPath: directory)
    }

    @Test("The crash is committed in its reserve under the reserve's name; the next launch names it by its id")
    func committedInPlace() async throws {
        let directory: String = TestSupport.childDirectory("in-place")
        // A run that ends well leaves its reserve, empty; the next run takes it over, name and
        // all, and crashes into it.
        await #expect(processExitsWith: .exitCode(0)) { [directory = directory as String] in
            ExitStatusTests.childStart(directory)
            _exit(0)
        }
        let crashes = directory + "/crashes"
        let reserve = try FileManager.default.contentsOfDirectory(atPath: crashes)
        #expect(reserve.count == 1 && reserve.allSatisfy { $0.hasSuffix(".crash.tmp") }, "\(reserve)")
        await #expect(processExitsWith: .signal(SIGSEGV)) { [directory = directory as String] in
            ExitStatusTests.childStart(directory)
            UnsafeMutablePointer<Int>(bitPattern: 8)!.pointee = 1
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: crashes) == reserve)
        // Whole and committed as it lies: it decodes without salvage.
        let bytes = try #require(FileManager.default.contents(atPath: crashes + "/" + reserve[0]))
        let id = try ReportFile.decode(Array(bytes)).crashReport().context.reportID
        #expect(!reserve[0].hasPrefix(id.fileStem), "the reserve was the first run's")
        let collected = Self.collect(directory)
        #expect(collected.count == 1 && collected.first?.isPartial == false)
        #expect(try FileManager.default.contentsOfDirectory(atPath: crashes) == [id.fileStem + ".crash"])
        try? FileManager.default.removeItem(atPath: directory)
    }

    @Test("A breakpoint trap the app ignores still kills (the kernel forces it), with a report")
    func ignoredForcedTrap() async throws {
        let directory: String = TestSupport.childDirectory("trap")
        await #expect(processExitsWith: .signal(SIGTRAP)) {
            signal(SIGTRAP, SIG_IGN)
            aft_test_breakpoint()
        }
        await #expect(processExitsWith: .signal(SIGTRAP)) { [directory = directory as String] in
            signal(SIGTRAP, SIG_IGN)
            ExitStatusTests.childStart(directory)
            aft_test_breakpoint()
        }
        #expect(Self.collect(directory).map(\.signal) == [SIGTRAP])
        try? FileManager.default.removeItem(atPath: directory)
    }

    @Test("A sent signal the app ignores: the process lives on, and no crash is reported")
    func ignoredSentSignal() async throws {
        let directory: String = TestSupport.childDirectory("ign")
        await #expect(processExitsWith: .success) { [directory = directory as String] in
            signal(SIGTRAP, SIG_IGN)
            ExitStatusTests.childStart(directory)
            raise(SIGTRAP)
            exit(0)
        }
        #expect(Self.collect(directory).isEmpty)
        try? FileManager.default.removeItem(atPath: directory)
    }
}
#endif
