import CHarnessFaults
import HarnessSupport
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// One crash the harness provokes in a child process, and what the report must then say.
struct Scenario: Sendable {
    /// The name used on the command line and in the table.
    var name: String
    /// What the child does.
    var summary: String
    /// The fault, reached through ``crashChainLevel1(_:_:)``.
    var fault: Fault
    /// The signal the child must die of (with and without Aftermath).
    var signal: Int32
    /// The expected exception.type: the signal and its si_code, e.g. "SIGSEGV (SEGV_MAPERR)".
    var exceptionType: String
    /// When set, the chain runs on a secondary thread of this name while the main thread waits.
    var threadName: String?
    /// The least number of frames the report's stack must have.
    var minimumFrames: Int
    /// The conditions the child crashes in (with and without Aftermath alike).
    var setup: Setup
    /// The fault goes through the crash chain (crashChainLevel1 to 3) on the crashing thread.
    var chained = true
    /// The Swift runtime's backtracer runs after Aftermath (it waits 32 s for a thread it cannot
    /// pause, as a stopped or traced one, with and without Aftermath: off for those).
    var swiftBacktracer: Bool { setup != .tracedWorker && setup != .unansweringWorker }

    init(
        _ name: String, _ summary: String, fault: Fault, signal: Int32, exceptionType: String,
        threadName: String? = nil, minimumFrames: Int = 6, setup: Setup = .none
    ) {
        self.name = name
        self.summary = summary
        self.fault = fault
        self.signal = signal
        self.exceptionType = exceptionType
        self.threadName = threadName
        self.minimumFrames = minimumFrames
        self.setup = setup
    }
}

/// Conditions a child sets up before it starts Aftermath and faults, as apps meet them in the
/// field. The child without Aftermath sets up the same (apart from Aftermath's own part).
enum Setup: Sendable {
    case none
    /// A seccomp filter that kills the process on process_vm_readv (as systemd's
    /// SystemCallFilter=@system-service does where that call is in @debug).
    case seccompKillProcessVMReadv
    /// A seccomp filter that refuses process_vm_readv with EPERM (containers without
    /// CAP_SYS_PTRACE).
    case seccompRefuseProcessVMReadv
    /// A file-size limit of 8 KiB (`ulimit -f 8`): smaller than a whole crash file.
    case fileSizeLimit
    /// Aftermath started, then the app's own SIGSEGV handler that calls the one it replaced,
    /// then Aftermath started again (without Aftermath: only the app's handler).
    case reinstallAroundChainingHandler
    /// Another thread stays inside a dl_iterate_phdr callback, holding the loader's lock, from
    /// after start until the crash: the report must not wait for it (the death within 1 s).
    case loaderLockHeld
    /// The same, with the handler unwinding the crashing thread itself (as where the crash file
    /// has no room for its stack): libunwind cannot finish in time, the frame-pointer stack.
    case loaderLockHeldUnwindInHandler
    /// The resident unwinding helper is killed after start: the crash's stack is still
    /// libunwind's, from a helper of its own.
    case unwindHelperKilled
    /// Eight workers, "worker-0" to "worker-7", blocked in aft_test_worker_parked_0 to 7.
    case namedWorkers
    /// A worker ("blocker") that blocks every signal.
    case signalBlockingWorker
    /// A worker ("spinner") in a busy loop in user code.
    case spinningWorker
    /// A worker ("traced") stopped by a tracer process.
    case tracedWorker
    /// A worker ("traced") whose tracer stops it at any signal for good: it never answers.
    case unansweringWorker
    /// 255 workers: 256 threads with the main one.
    case manyThreads
    /// A second thread ("crasher-2") faults while the first crash is written.
    case secondCrasher
    /// A worker ("overflower") created before start overflows its stack.
    case workerOverflowBeforeStart

    /// Another thread holds the loader's lock at the crash.
    var holdsLoaderLock: Bool { self == .loaderLockHeld || self == .loaderLockHeldUnwindInHandler }

    /// Workers started after Aftermath (before the fault), by kind and count.
    var workers: [(kind: Int32, count: Int32)] {
        switch self {
        case .namedWorkers: [(AFT_TEST_WORKER_PARKED, 8)]
        case .seccompKillProcessVMReadv, .seccompRefuseProcessVMReadv: [(AFT_TEST_WORKER_PARKED, 4)]
        case .signalBlockingWorker: [(AFT_TEST_WORKER_PARKED, 2), (AFT_TEST_WORKER_BLOCKS_SIGNALS, 1)]
        case .spinningWorker: [(AFT_TEST_WORKER_PARKED, 2), (AFT_TEST_WORKER_SPINNING, 1)]
        case .manyThreads: [(AFT_TEST_WORKER_PARKED, 255)]
        default: []
        }
    }
}

extension Scenario {
    #if arch(arm64)
    /// A Swift runtime trap: `brk` on arm64.
    static let swiftTrap: (signal: Int32, type: String) = (SIGTRAP, "SIGTRAP (TRAP_BRKPT)")
    /// An undefined instruction (`udf`) as arm64 Linux reports it.
    static let undefinedInstructionType = "SIGILL (ILL_ILLOPC)"
    #else
    /// A Swift runtime trap: `ud2` on x86-64.
    static let swiftTrap: (signal: Int32, type: String) = (SIGILL, "SIGILL (ILL_ILLOPN)")
    /// An undefined instruction (`ud2`) as x86-64 Linux reports it.
    static let undefinedInstructionType = "SIGILL (ILL_ILLOPN)"
    #endif

    /// Every scenario, in the order the matrix runs them.
    static let all: [Scenario] = {
        var scenarios = [
            Scenario(
                "null-deref", "store through a pointer into the null page",
                fault: .nullDereference, signal: SIGSEGV, exceptionType: "SIGSEGV (SEGV_MAPERR)"),
            Scenario(
                "abort", "libc abort()",
                fault: .abort, signal: SIGABRT, exceptionType: "SIGABRT (SI_TKILL)"),
            Scenario(
                "force-unwrap", "force-unwrap of nil (Swift trap)",
                fault: .forceUnwrapNil, signal: swiftTrap.signal, exceptionType: swiftTrap.type),
            Scenario(
                "fatal-error", "fatalError() (Swift trap)",
                fault: .fatalError, signal: swiftTrap.signal, exceptionType: swiftTrap.type),
            Scenario(
                "index-out-of-range", "array index out of range (Swift trap)",
                fault: .indexOutOfRange, signal: swiftTrap.signal, exceptionType: swiftTrap.type),
            Scenario(
                "sigbus-mmap", "write to a mapping of a file truncated to 0",
                fault: .truncatedMapping, signal: SIGBUS, exceptionType: "SIGBUS (BUS_ADRERR)"),
            Scenario(
                "illegal-instruction", "execute an undefined instruction (ud2/udf)",
                fault: .illegalInstruction, signal: SIGILL, exceptionType: undefinedInstructionType),
            Scenario(
                "secondary-thread", "null dereference on a named secondary thread",
                fault: .nullDereference, signal: SIGSEGV, exceptionType: "SIGSEGV (SEGV_MAPERR)",
                threadName: "harness-crasher"),
            Scenario(
                "deep-recursion", "null dereference 1,000 frames deep",
                fault: .deepRecursion, signal: SIGSEGV, exceptionType: "SIGSEGV (SEGV_MAPERR)",
                minimumFrames: Fault.recursionDepth),
            Scenario(
                "seccomp-kill", "null dereference, 4 workers, a seccomp filter killing on process_vm_readv and ptrace",
                fault: .nullDereference, signal: SIGSEGV, exceptionType: "SIGSEGV (SEGV_MAPERR)",
                setup: .seccompKillProcessVMReadv),
            Scenario(
                "seccomp-eperm", "null dereference, 4 workers, a seccomp filter refusing process_vm_readv and ptrace",
                fault: .nullDereference, signal: SIGSEGV, exceptionType: "SIGSEGV (SEGV_MAPERR)",
                setup: .seccompRefuseProcessVMReadv),
            Scenario(
                "file-size-limit", "null dereference under ulimit -f 8 (a crash file does not fit)",
                fault: .nullDereference, signal: SIGSEGV, exceptionType: "SIGSEGV (SEGV_MAPERR)",
                setup: .fileSizeLimit),
            Scenario(
                "reinstall-chain", "start, an app handler chaining to the previous, start again, null dereference",
                fault: .nullDereference, signal: SIGSEGV, exceptionType: "SIGSEGV (SEGV_MAPERR)",
                setup: .reinstallAroundChainingHandler),
            Scenario(
                "loader-lock", "null dereference while another thread holds the loader's lock",
                fault: .nullDereference, signal: SIGSEGV, exceptionType: "SIGSEGV (SEGV_MAPERR)",
                setup: .loaderLockHeld),
            Scenario(
                "loader-lock-here", "the same, the handler unwinding itself instead of the next launch",
                fault: .nullDereference, signal: SIGSEGV, exceptionType: "SIGSEGV (SEGV_MAPERR)",
                setup: .loaderLockHeldUnwindInHandler),
            Scenario(
                "helper-killed", "null dereference after the resident unwinding helper was killed",
                fault: .nullDereference, signal: SIGSEGV, exceptionType: "SIGSEGV (SEGV_MAPERR)",
                setup: .unwindHelperKilled),
        ]
        scenarios += threadScenarios
        #if arch(x86_64)
        // arm64 integer division by zero does not trap (sdiv returns 0): x86-64 only.
        scenarios.insert(
            Scenario(
                "divide-by-zero", "C integer division by zero (the CPU's divide instruction)",
                fault: .integerDivisionByZero, signal: SIGFPE, exceptionType: "SIGFPE (FPE_INTDIV)"),
            at: 5)
        #endif
        return scenarios
    }()

    /// Every thread at a crash: the other threads in the record, `aftermath show` and the
    /// minidump.
    static let threadScenarios: [Scenario] = {
        func row(_ name: String, _ summary: String, _ setup: Setup) -> Scenario {
            Scenario(
                name, summary, fault: .nullDereference, signal: SIGSEGV, exceptionType: "SIGSEGV (SEGV_MAPERR)",
                setup: setup)
        }
        var overflow = Scenario(
            "worker-overflow", "a worker created before start overflows its stack",
            fault: .stackOverflow, signal: SIGSEGV, exceptionType: "SIGSEGV (SEGV_ACCERR)",
            threadName: "overflower", minimumFrames: 100, setup: .workerOverflowBeforeStart)
        overflow.chained = false
        return [
            row("threads-named", "8 named workers parked in named functions; the main thread crashes", .namedWorkers),
            row("threads-blocker", "a worker that blocks every signal; the main thread crashes", .signalBlockingWorker),
            row("threads-spinner", "a worker spinning in user code; the main thread crashes", .spinningWorker),
            row("threads-traced", "a worker stopped by a tracer; the main thread crashes", .tracedWorker),
            row("threads-no-answer", "a worker that never answers (its tracer holds the signal)", .unansweringWorker),
            row("threads-256", "256 threads; the main thread crashes", .manyThreads),
            row("threads-two-crash", "a second thread faults while the first crash is written", .secondCrasher),
            overflow,
        ]
    }()

    static func named(_ name: String) -> Scenario? { all.first { $0.name == name } }
}
