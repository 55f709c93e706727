#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A real fault of the kind a scenario exercises. None is simulated: no signal is sent with
/// `raise`/`kill` except by `abort()` itself.
enum Fault: String, Sendable, CaseIterable {
    case nullDereference
    case abort
    case forceUnwrapNil
    case fatalError
    case indexOutOfRange
    case integerDivisionByZero
    case truncatedMapping
    case illegalInstruction
    case deepRecursion
}

/// The faults. Each takes a run-time seed and returns a value the caller uses, so neither the
/// fault nor the call to it can be optimized away.
enum Faults {
    /// How deep ``Fault/deepRecursion`` recurses before it dereferences null.
    static let recursionDepth = 1_000

    @inline(never)
    static func perform(_ fault: Fault, _ seed: Int) -> Int {
        switch fault {
        case .nullDereference: return nullDereference(seed)
        case .abort: return abortProcess(seed)
        case .forceUnwrapNil: return forceUnwrapNil(seed)
        case .fatalError: return callFatalError(seed)
        case .indexOutOfRange: return indexOutOfRange(seed)
        case .integerDivisionByZero: return integerDivisionByZero(seed)
        case .truncatedMapping: return touchTruncatedMapping(seed)
        case .illegalInstruction: return executeIllegalInstruction(seed)
        case .deepRecursion: return crashRecursion(recursionDepth, seed)
        }
    }

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
        if Opaque.value(seed) != Int.min { Swift.fatalError("crash-harness: fatalError scenario") }
        return seed
    }

    @inline(never)
    static func indexOutOfRange(_ seed: Int) -> Int {
        let values = [seed, seed &+ 1, seed &+ 2]
        return values[Opaque.value(values.count)]
    }

    /// C integer division by zero: glibc's `div(3)` is plain C (`numer / denom`, an `idiv` on
    /// x86-64), so this is a real hardware division fault: SIGFPE (FPE_INTDIV). Swift's own `/`
    /// checks for zero and would trap with SIGILL instead.
    @inline(never)
    static func integerDivisionByZero(_ seed: Int) -> Int {
        let quotient = div(Int32(truncatingIfNeeded: seed | 1), Int32(Opaque.value(0))).quot
        return Int(quotient)
    }

    /// Maps two pages of a file, truncates the file to zero, then writes to the second page:
    /// SIGBUS (BUS_ADRERR). The file is unlinked at once; the descriptor keeps it alive.
    @inline(never)
    static func touchTruncatedMapping(_ seed: Int) -> Int {
        let page = sysconf(Int32(_SC_PAGESIZE))
        let directory = getenv("TMPDIR").map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
        var template = Array("\(directory)/crash-harness-sigbus.XXXXXX".utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard fd >= 0 else { return setupFailed("mkstemp", seed) }
        template.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) }
        guard ftruncate(fd, off_t(2 * page)) == 0 else { return setupFailed("ftruncate", seed) }
        guard let map = mmap(nil, 2 * page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0),
              map != MAP_FAILED else { return setupFailed("mmap", seed) }
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
        let code: [UInt8] = [0xFD, 0x7B, 0xBF, 0xA9,  // stp x29, x30, [sp, #-16]!
                             0xFD, 0x03, 0x00, 0x91,  // mov x29, sp
                             0x00, 0x00, 0x00, 0x00]  // udf #0
        #else
        #error("crash-harness: no illegal-instruction stub for this architecture")
        #endif
        let page = sysconf(Int32(_SC_PAGESIZE))
        guard let memory = mmap(nil, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0),
              memory != MAP_FAILED else { return setupFailed("mmap", seed) }
        memory.copyMemory(from: code, byteCount: code.count)
        guard mprotect(memory, page, PROT_READ | PROT_EXEC) == 0 else { return setupFailed("mprotect", seed) }
        typealias Stub = @convention(c) (Int) -> Int
        let stub = unsafeBitCast(memory, to: Stub.self)
        return stub(seed) &+ 1
    }

    /// A scenario could not set its fault up: exit with a distinct status the harness reports.
    static func setupFailed(_ what: String, _ seed: Int) -> Int {
        let message = "crash-harness: scenario setup failed: \(what): \(String(cString: strerror(errno)))\n"
        _ = message.withCString { write(2, $0, strlen($0)) }
        _exit(ChildMode.setupFailureStatus)
    }
}
