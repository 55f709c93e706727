import CHarnessFaults
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The real faults the harnesses, the benchmark and the tests crash with. None is simulated:
/// no signal is sent with `raise`/`kill` except by `abort()` itself.
package enum Fault: String, Sendable, CaseIterable {
    /// A store into the null page: SIGSEGV (SEGV_MAPERR).
    case nullDereference
    /// libc's abort(): SIGABRT (SI_TKILL).
    case abort
    /// Swift runtime traps: SIGILL on x86-64 (`ud2`), SIGTRAP on arm64 (`brk`).
    case forceUnwrapNil
    case fatalError
    case indexOutOfRange
    /// The CPU's integer divide by zero: SIGFPE (FPE_INTDIV). x86-64 only: arm64's `sdiv`
    /// returns 0.
    case integerDivisionByZero
    /// A write to a mapping of a file truncated to zero: SIGBUS (BUS_ADRERR).
    case truncatedMapping
    /// An undefined instruction in freshly mapped code (no unwind info): SIGILL.
    case illegalInstruction
    /// A breakpoint instruction (`int3`, `brk`): SIGTRAP.
    case breakpoint
    /// A null dereference ``Fault/recursionDepth`` frames deep: SIGSEGV (SEGV_MAPERR).
    case deepRecursion
    /// Unbounded recursion off the end of the thread's stack: SIGSEGV.
    case stackOverflow

    /// How deep ``Fault/deepRecursion`` recurses before it dereferences null.
    package static let recursionDepth = 1_000
    /// Exit status of a process whose fault could not be set up (mkstemp, mmap, ...).
    package static let setupFailureStatus: Int32 = 70

    /// The signal the process dies of.
    package var signal: Int32 {
        switch self {
        case .nullDereference, .deepRecursion, .stackOverflow: SIGSEGV
        case .abort: SIGABRT
        case .forceUnwrapNil, .fatalError, .indexOutOfRange: Self.swiftTrapSignal
        case .integerDivisionByZero: SIGFPE
        case .truncatedMapping: SIGBUS
        case .illegalInstruction: SIGILL
        case .breakpoint: SIGTRAP
        }
    }

    #if arch(arm64)
    package static let swiftTrapSignal = SIGTRAP
    #else
    package static let swiftTrapSignal = SIGILL
    #endif

    /// Faults. Takes a run-time seed and returns a value the caller uses, so neither the
    /// fault nor the call to it can be optimized away; returns only if the fault did not kill.
    @inline(never)
    package func trigger(_ seed: Int = 0) -> Int {
        switch self {
        case .nullDereference: return Faults.nullDereference(seed)
        case .abort: return Faults.abortProcess(seed)
        case .forceUnwrapNil: return Faults.forceUnwrapNil(seed)
        case .fatalError: return Faults.callFatalError(seed)
        case .indexOutOfRange: return Faults.indexOutOfRange(seed)
        case .integerDivisionByZero: return Faults.integerDivisionByZero(seed)
        case .truncatedMapping: return Faults.touchTruncatedMapping(seed)
        case .illegalInstruction: return Faults.executeIllegalInstruction(seed)
        case .deepRecursion: return Faults.recurseThenFault(Fault.recursionDepth, seed)
        case .breakpoint: return Faults.breakpoint(seed)
        case .stackOverflow:
            var depth = 0
            return Faults.overflowStack(&depth)
        }
    }
}

/// The faults' bodies, each its own frame.
enum Faults {
    /// A store through a pointer into the null page (a field at offset 8 of a null object):
    /// SIGSEGV (SEGV_MAPERR).
    @inline(never)
    static func nullDereference(_ seed: Int) -> Int {
        let pointer = UnsafeMutablePointer<Int>(bitPattern: Opaque.value(8))!
        pointer.pointee = seed
        return pointer.pointee
    }

    /// libc's abort(): SIGABRT sent to the thread itself (SI_TKILL).
    @inline(never)
    static func abortProcess(_ seed: Int) -> Int {
        if Opaque.value(seed) != Int.min { Glibc.abort() }
        return seed
    }

    /// A Swift runtime trap: `ud2` (SIGILL) on x86-64, `brk` (SIGTRAP) on arm64.
    @inline(never)
    static func forceUnwrapNil(_ seed: Int) -> Int {
        let maybe: Int? = Opaque.value(0) == 0 ? nil : seed
        return maybe!
    }

    @inline(never)
    static func callFatalError(_ seed: Int) -> Int {
        if Opaque.value(seed) != Int.min { Swift.fatalError("harness: fatalError fault") }
        return seed
    }

    @inline(never)
    static func indexOutOfRange(_ seed: Int) -> Int {
        let values = [seed, seed &+ 1, seed &+ 2]
        return values[Opaque.value(values.count)]
    }

    /// C integer division by zero through the CPU's divide instruction (`idiv` on x86-64): a
    /// real hardware division fault, SIGFPE (FPE_INTDIV). Swift's own `/` checks for zero and
    /// would trap with SIGILL instead.
    @inline(never)
    static func integerDivisionByZero(_ seed: Int) -> Int {
        Int(aft_test_divide(Int32(truncatingIfNeeded: seed | 1), Int32(Opaque.value(0))))
    }

    @inline(never)
    static func breakpoint(_ seed: Int) -> Int {
        if Opaque.value(seed) != Int.min { aft_test_breakpoint() }
        return seed
    }

    /// Recursion `depth` calls deep that then dereferences null. `@_optimize(none)` so that
    /// LLVM's tail-recursion elimination (which handles `f(n - 1) + 1` with an accumulator)
    /// keeps every frame.
    @inline(never) @_optimize(none)
    static func recurseThenFault(_ depth: Int, _ seed: Int) -> Int {
        if depth == 0 { return nullDereference(seed) }
        return recurseThenFault(depth - 1, seed) &+ 1
    }

    /// Unbounded recursion: each frame keeps a buffer alive so it cannot become a loop.
    @inline(never)
    static func overflowStack(_ depth: UnsafeMutablePointer<Int>) -> Int {
        var buffer = (depth.pointee, 0, 0, 0, 0, 0, 0, 0)
        depth.pointee += 1
        let below = depth.pointee == Int.max ? 0 : overflowStack(depth)
        return withUnsafeBytes(of: &buffer) { Int($0[0]) } &+ below
    }

    /// Maps two pages of a file, truncates the file to zero, then writes to the second page:
    /// SIGBUS (BUS_ADRERR). The file is unlinked at once; the descriptor keeps it alive.
    @inline(never)
    static func touchTruncatedMapping(_ seed: Int) -> Int {
        let page = sysconf(Int32(_SC_PAGESIZE))
        let directory = getenv("TMPDIR").map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
        var template = Array("\(directory)/harness-sigbus.XXXXXX".utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard fd >= 0 else { return setupFailed("mkstemp", seed) }
        template.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) }
        guard ftruncate(fd, off_t(2 * page)) == 0 else { return setupFailed("ftruncate", seed) }
        guard let map = mmap(nil, 2 * page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0),
            map != MAP_FAILED
        else { return setupFailed("mmap", seed) }
        guard ftruncate(fd, 0) == 0 else { return setupFailed("ftruncate", seed) }
        let bytes = map.assumingMemoryBound(to: UInt8.self)
        bytes[page] = UInt8(truncatingIfNeeded: seed)
        return Int(bytes[page])
    }

    /// Executes an undefined instruction from a freshly mapped code page: SIGILL (ILL_ILLOPN).
    /// The stub builds a frame record first, so an unwinder without unwind info for the page
    /// still finds the caller through the frame pointer.
    @inline(never)
    static func executeIllegalInstruction(_ seed: Int) -> Int {
        #if arch(x86_64)
        let code: [UInt8] = [0x55, 0x48, 0x89, 0xE5, 0x0F, 0x0B]  // push %rbp; mov %rsp,%rbp; ud2
        #elseif arch(arm64)
        let code: [UInt8] = [
            0xFD, 0x7B, 0xBF, 0xA9,  // stp x29, x30, [sp, #-16]!
            0xFD, 0x03, 0x00, 0x91,  // mov x29, sp
            0x00, 0x00, 0x00, 0x00,
        ]  // udf #0
        #else
        #error("no illegal-instruction stub for this architecture")
        #endif
        let page = sysconf(Int32(_SC_PAGESIZE))
        guard let memory = mmap(nil, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0),
            memory != MAP_FAILED
        else { return setupFailed("mmap", seed) }
        memory.copyMemory(from: code, byteCount: code.count)
        guard mprotect(memory, page, PROT_READ | PROT_EXEC) == 0 else { return setupFailed("mprotect", seed) }
        typealias Stub = @convention(c) (Int) -> Int
        let stub = unsafeBitCast(memory, to: Stub.self)
        return stub(seed) &+ 1
    }

    /// A fault could not be set up: exit with a distinct status the harness reports.
    static func setupFailed(_ what: String, _ seed: Int) -> Int {
        let message = "harness: fault setup failed: \(what): \(String(cString: strerror(errno)))\n"
        _ = message.withCString { write(2, $0, strlen($0)) }
        _exit(Fault.setupFailureStatus)
    }
}

/// Values the optimizer cannot know at compile time.
///
/// A fault the compiler can prove (a load from a constant null pointer, a constant index out of
/// range) may be folded into a trap or removed under `-O`. Routing the inputs of every fault
/// through the environment, which the harnesses never set, keeps each fault a real one.
package enum Opaque {
    /// `value`, laundered through a run-time condition (the variable is never set).
    @inline(never)
    package static func value(_ value: Int) -> Int {
        getenv("AFTERMATH_HARNESS_NEVER_SET") == nil ? value : value &+ 1
    }
}
