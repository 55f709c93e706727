import CSignalShim

/// One thread of the process at a crash, as the handler recorded it (format version 2).
package struct CrashThread: Sendable, Hashable {
    /// Where a thread's registers came from (AFT_THREAD_CONTEXT_*).
    package enum ContextSource: String, Sendable, Hashable {
        /// Every register, from the thread's own signal frame.
        case signal
        /// Every register, from the signal frame of its own crash.
        case crash
        /// The stack pointer and pc only, from /proc/self/task/<tid>/syscall.
        case syscall
        /// (One of Aftermath's own threads) the stack pointer and pc it noted before its wait.
        case parked
        /// None: the thread is listed by id, name and state only.
        case none

        package init(code: UInt32) {
            switch code {
            case UInt32(AFT_THREAD_CONTEXT_SIGNAL): self = .signal
            case UInt32(AFT_THREAD_CONTEXT_CRASH): self = .crash
            case UInt32(AFT_THREAD_CONTEXT_SYSCALL): self = .syscall
            case UInt32(AFT_THREAD_CONTEXT_PARKED): self = .parked
            default: self = .none
            }
        }
    }

    /// Why a thread has no full context (AFT_THREAD_WHY_*); nil when it has one.
    package enum MissingContext: String, Sendable, Hashable {
        case blocksSignal = "blocks_signal"
        case stopped
        case uninterruptible
        case noAnswer = "no_answer"
        case signalFailed = "signal_failed"
        case noSignal = "no_signal"
        case exiting
        /// A hang's capture, or a crash the app may live through, left it asleep in a call a
        /// signal would cut short (sp and pc from /proc): the app never sees a capture.
        case asleep
        /// One of Aftermath's own threads: never paused. The watchdog, pinger and run updater are
        /// listed with the sp and pc each noted before its wait (none while it runs).
        case aftermath

        package init?(code: UInt32) {
            switch code {
            case UInt32(AFT_THREAD_WHY_BLOCKS_SIGNAL): self = .blocksSignal
            case UInt32(AFT_THREAD_WHY_STOPPED): self = .stopped
            case UInt32(AFT_THREAD_WHY_UNINTERRUPTIBLE): self = .uninterruptible
            case UInt32(AFT_THREAD_WHY_NO_ANSWER): self = .noAnswer
            case UInt32(AFT_THREAD_WHY_SIGNAL_FAILED): self = .signalFailed
            case UInt32(AFT_THREAD_WHY_NO_SIGNAL): self = .noSignal
            case UInt32(AFT_THREAD_WHY_ZOMBIE): self = .exiting
            case UInt32(AFT_THREAD_WHY_ASLEEP): self = .asleep
            case UInt32(AFT_THREAD_WHY_OWN): self = .aftermath
            default: return nil
            }
        }
    }

    /// Kernel thread id.
    package var id: UInt64
    /// /proc/self/task/<tid>/comm, at most 15 bytes.
    package var name: String
    /// The thread whose crash this is.
    package var crashed: Bool
    /// The process's first thread (tid == pid).
    package var isMain: Bool
    /// It crashed too, while the first crash was being written (its signal).
    package var alsoCrashedSignal: Int32?
    /// One of Aftermath's own threads.
    package var isAftermath: Bool
    /// (Hangs) inside a Swift concurrency job: `swift_job_run` on its stack.
    package var isSwiftJob = false
    /// (Known by sp and pc only) its frame pointer came from the unwind tables and a prologue,
    /// not from a scan of its stack: no other frame record is tried for it.
    package var framePointerFromTables = false
    /// The kernel's state letter at the capture (R, S, D, T, t, ...; "?" when unknown).
    package var state: String
    package var contextSource: ContextSource
    package var missingContext: MissingContext?
    package var pc: UInt64
    package var sp: UInt64
    /// Raw registers, in aft_crash_info's order; empty without a full context.
    package var registers: [UInt64]
    /// x86-64: the 512-byte FXSAVE area; arm64: fpsr, fpcr (u32 each), then v0-v31.
    package var fpState: [UInt8]
    /// The syscall it was in (/proc/.../syscall), -1 outside one, nil when unknown.
    package var syscallNumber: Int64?
    package var unwinder: Unwinder
    package var unwindStatus: UnwindStatus
    /// Its stack, innermost first.
    package var frames: [UInt64]
    package var framesTruncated: Bool
    /// The stack memory kept, from `stackStart`; empty when none was read.
    package var stackStart: UInt64
    package var stack: [UInt8]
    /// The stack went on past its cap.
    package var stackTruncated: Bool
    /// Its Swift async callers, when it ran in a task.
    package var asyncChain: SwiftAsyncChain?
}

extension CrashThread {
    /// A thread from its record, its frames and its stack memory.
    package init(record r: aft_thread, frames: [UInt64], stackStart: UInt64, stack: [UInt8]) {
        var r = r
        id = r.thread_id
        name = CString.read(&r.name)
        crashed = r.flags & UInt32(AFT_THREAD_CRASHED) != 0
        isMain = r.flags & UInt32(AFT_THREAD_MAIN) != 0
        isAftermath = r.flags & UInt32(AFT_THREAD_AFTERMATH) != 0
        framePointerFromTables = r.flags & UInt32(AFT_THREAD_FP_FROM_TABLES) != 0
        isSwiftJob = r.flags & UInt32(AFT_THREAD_SWIFT_JOB) != 0
        alsoCrashedSignal = r.flags & UInt32(AFT_THREAD_ALSO_CRASHED) != 0 ? r.crash_signal : nil
        let letter = UInt8(bitPattern: r.state)
        state = letter >= 0x21 && letter < 0x7F ? String(UnicodeScalar(letter)) : "?"
        contextSource = ContextSource(code: r.context_source)
        missingContext = MissingContext(code: r.why)
        pc = r.pc
        sp = r.sp
        let count = Int(min(r.register_count, AFT_MAX_REGISTERS))
        registers = withUnsafeBytes(of: &r.registers) { Array($0.bindMemory(to: UInt64.self).prefix(count)) }
        let fpSize = Int(min(r.fp_state_size, AFT_FP_STATE_CAPACITY))
        fpState = withUnsafeBytes(of: &r.fp_state) { Array($0.prefix(fpSize)) }
        syscallNumber = r.syscall_number >= -1 ? r.syscall_number : nil
        unwinder = Unwinder(code: r.unwinder)
        unwindStatus = UnwindStatus(code: r.unwind_status)
        self.frames = frames
        framesTruncated = r.frames_truncated != 0
        self.stackStart = stackStart
        self.stack = stack
        stackTruncated = r.flags & UInt32(AFT_THREAD_STACK_TRUNCATED) != 0
    }
}

/// How the capture of every thread went (aft_threads_info).
package struct ThreadCapture: Sendable, Hashable {
    /// Threads /proc/self/task listed during the capture.
    package var seen: UInt32
    /// Threads recorded.
    package var recorded: UInt32
    /// Threads past the cap, recorded nowhere.
    package var omitted: UInt32
    /// Threads that ended during the capture.
    package var exited: UInt32
    package var signalled: UInt32
    package var answered: UInt32
    package var rounds: UInt32
    package var captureSignal: Int32
    package var captureNs: UInt64
    package var unwindNs: UInt64
    package var deadlineNs: UInt64
    package var deadlineReached: Bool
    package var taskListUnreadable: Bool
    package var stacksCutByFileLimit: Bool
    package var stackBytes: UInt32

    package init(_ i: aft_threads_info) {
        seen = i.seen
        recorded = i.recorded
        omitted = i.omitted
        exited = i.exited
        signalled = i.signalled
        answered = i.answered
        rounds = i.rounds
        captureSignal = Int32(bitPattern: i.capture_signal)
        captureNs = i.capture_ns
        unwindNs = i.unwind_ns
        deadlineNs = i.deadline_ns
        deadlineReached = i.flags & UInt32(AFT_THREADS_DEADLINE_REACHED) != 0
        taskListUnreadable = i.flags & UInt32(AFT_THREADS_NO_TASK_LIST) != 0
        stacksCutByFileLimit = i.flags & UInt32(AFT_THREADS_CUT_BY_FILE_LIMIT) != 0
        stackBytes = i.stack_bytes
    }
}
