import Aftermath
import AftermathNextLaunch
import AftermathOTLP
import AftermathTesting
import AftermathSymbolication
import HarnessSupport
import CHarnessFaults
import CSignalShim
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// What runs inside the child processes: the crashing app, and its next launch.
enum ChildMode {
    static let serviceName = "crash-harness"
    /// service.version of the crashing run; the record must carry this one.
    static let crashedVersion = "harness-1.2.3"
    /// service.version of the next launch: different, so the check can tell the two apart.
    static let nextLaunchVersion = "harness-next-2.0.0"
    /// The line the crashing child prints before it faults.
    static let contextPrefix = "AFTERMATH_CONTEXT"
    /// Exit status of a child whose fault could not be set up (mkstemp, mmap, ...).
    static let setupFailureStatus = Fault.setupFailureStatus
    /// Exit status of a child whose fault did not crash it.
    static let survivedStatus: Int32 = 71
    /// Exit status of a child that could not start Aftermath.
    static let startFailureStatus: Int32 = 72

    /// Starts Aftermath (unless told not to), prints the run's context, then faults through
    /// the crash chain.
    static func crash(_ scenario: Scenario, reportsDirectory: String, withAftermath: Bool) -> Never {
        prepare(scenario.setup)
        if scenario.setup == .workerOverflowBeforeStart {
            check(aft_test_start_overflow_worker(0), "starting the overflowing worker")
        }
        if withAftermath {
            let configuration = Aftermath.Configuration(
                serviceName: serviceName, serviceVersion: crashedVersion, exporter: InMemoryExporter(),
                reportsDirectory: reportsDirectory, deliverPendingReportsSynchronously: true)
            do {
                try Aftermath.start(configuration)
                if scenario.setup == .reinstallAroundChainingHandler {
                    installAppHandler()
                    try Aftermath.start(configuration)
                    // The second start's new threads past glibc's start, where a thread has every
                    // signal blocked: a crash in that window leaves the Swift backtracer one
                    // thread it cannot pause (as any thread the app had just created would).
                    usleep(50_000)
                }
            } catch {
                say("crash-harness: Aftermath.start failed: \(error)\n", fd: 2)
                _exit(startFailureStatus)
            }
            let context = Aftermath.currentContext
            let session = context?.sessionID.uuidString.lowercased() ?? "unknown"
            say("\(contextPrefix) session=\(session) build=\(context?.appBuildID ?? "")\n")
        } else {
            if scenario.setup == .reinstallAroundChainingHandler { installAppHandler() }
            say("\(contextPrefix) none\n")
        }
        if scenario.setup == .unwindHelperKilled && withAftermath {
            aft_unwind_resident_start()  // the resident of a process that hung once
            let helpers = UnwindHelperProcess.waitForHelpers(of: getpid())
            guard helpers.count == 1 else {
                say("crash-harness: \(helpers.count) unwinding helpers, expected 1\n", fd: 2)
                _exit(setupFailureStatus)
            }
            kill(helpers[0], SIGKILL)
            guard UnwindHelperProcess.ended(helpers[0], formerParent: getpid(), within: 2) else {
                say("crash-harness: the unwinding helper outlived SIGKILL\n", fd: 2)
                _exit(setupFailureStatus)
            }
        }
        if scenario.setup == .loaderLockHeldUnwindInHandler { aft_test_unwind_in_handler(1) }
        if scenario.setup.holdsLoaderLock {
            let status = aft_test_hold_loader_lock()
            guard status == 0 else {
                say("crash-harness: holding the loader's lock failed: \(status)\n", fd: 2)
                _exit(setupFailureStatus)
            }
        }
        for (kind, count) in scenario.setup.workers {
            check(aft_test_start_workers(kind, count), "starting \(count) workers")
        }
        if scenario.setup == .tracedWorker { check(aft_test_start_traced_worker(0), "starting a traced worker") }
        if scenario.setup == .unansweringWorker { check(aft_test_start_traced_worker(1), "starting a traced worker") }
        if scenario.setup == .secondCrasher { check(aft_test_arm_second_crasher(), "arming a second crasher") }
        if scenario.setup == .workerOverflowBeforeStart {
            aft_test_release_overflow_worker()
            while true { pause() }
        }
        let seed = CommandLine.arguments.count &* 7919
        if scenario.setup == .secondCrasher { aft_test_open_crash_gate() }
        if scenario.threadName != nil { crashOnThread(scenario) }
        survived(crashChainLevel1(scenario, seed))
    }

    /// Ends the child as a set-up failure when status is an error.
    static func check(_ status: Int32, _ what: String) {
        guard status != 0 else { return }
        say("crash-harness: \(what) failed: \(status)\n", fd: 2)
        _exit(setupFailureStatus)
    }

    /// The app's own SIGSEGV handler, which calls the one it replaced.
    static func installAppHandler() {
        guard aft_test_install_chaining_handler(0, SIGSEGV, 0) == 0 else {
            say("crash-harness: installing the app's handler failed\n", fd: 2)
            _exit(setupFailureStatus)
        }
    }

    /// Puts the child into the scenario's conditions before Aftermath starts.
    static func prepare(_ setup: Setup) {
        switch setup {
        case .none, .reinstallAroundChainingHandler, .loaderLockHeld, .loaderLockHeldUnwindInHandler,
            .unwindHelperKilled, .namedWorkers,
            .signalBlockingWorker, .spinningWorker, .tracedWorker, .unansweringWorker, .manyThreads, .secondCrasher,
            .workerOverflowBeforeStart:
            break
        case .seccompKillProcessVMReadv, .seccompRefuseProcessVMReadv:
            let status = aft_test_refuse_process_vm_readv(setup == .seccompKillProcessVMReadv ? 1 : 0)
            guard status == 0 else {
                say("crash-harness: installing the seccomp filter failed: \(status)\n", fd: 2)
                _exit(setupFailureStatus)
            }
        case .fileSizeLimit:
            var limit = rlimit(rlim_cur: 8 * 1024, rlim_max: 8 * 1024)
            guard setrlimit(__rlimit_resource_t(RLIMIT_FSIZE.rawValue), &limit) == 0 else {
                say("crash-harness: setrlimit(RLIMIT_FSIZE) failed\n", fd: 2)
                _exit(setupFailureStatus)
            }
        }
    }

    /// Runs the chain on a new thread, named by the scenario, while this (the main) thread
    /// waits for it.
    private static func crashOnThread(_ scenario: Scenario) -> Never {
        guard let index = Scenario.all.firstIndex(where: { $0.name == scenario.name }) else {
            survived(-1)
        }
        var thread = pthread_t()
        let status = pthread_create(
            &thread, nil,
            { argument in
                let scenario = Scenario.all[Int(bitPattern: argument) - 1]
                ChildMode.nameCurrentThread(scenario.threadName ?? "")
                ChildMode.survived(crashChainLevel1(scenario, Int(bitPattern: argument) &* 7919))
            }, UnsafeMutableRawPointer(bitPattern: index + 1))
        guard status == 0 else {
            say("crash-harness: pthread_create failed: \(status)\n", fd: 2)
            _exit(setupFailureStatus)
        }
        pthread_join(thread, nil)
        survived(-2)
    }

    /// pthread_setname_np for the calling thread (the GNU function is not visible to Swift).
    static func nameCurrentThread(_ name: String) {
        let fd = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else { return }
        say(name, fd: fd)
        close(fd)
    }

    static func survived(_ value: Int) -> Never {
        say("crash-harness: the fault did not crash the process (\(value))\n", fd: 2)
        _exit(survivedStatus)
    }

    /// The next launch: reports what is pending, then starts Aftermath, which delivers it
    /// synchronously; prints what was exported as RECORD lines.
    static func nextLaunch(reportsDirectory: String) -> Never {
        let pending = ReportCollector(directory: ReportDirectory(root: reportsDirectory)).collect(moveRejected: false)
        say("NEXT_LAUNCH pending=\(pending.reports.count) rejected=\(pending.rejected.count)\n")
        for file in pending.rejected { say("NEXT_LAUNCH rejected \(file.path): \(file.reason)\n") }
        let exporter = InMemoryExporter()
        let configuration = Aftermath.Configuration(
            serviceName: serviceName, serviceVersion: nextLaunchVersion,
            exporter: exporter, reportsDirectory: reportsDirectory,
            deliverPendingReportsSynchronously: true)
        do {
            try Aftermath.start(configuration)
        } catch {
            say("crash-harness: Aftermath.start failed: \(error)\n", fd: 2)
            _exit(startFailureStatus)
        }
        RecordLine.emit(exporter.batches)
        say("NEXT_LAUNCH done\n")
        exit(0)
    }

    /// Writes text straight to a descriptor: nothing is left in a stdio buffer when the
    /// process dies a moment later.
    static func say(_ text: String, fd: Int32 = 1) {
        writeNow(text, fd: fd)
    }
}
