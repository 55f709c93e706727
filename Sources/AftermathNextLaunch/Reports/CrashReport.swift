import CSignalShim

/// A crash as the signal handler recorded it, decoded on a later launch.
package struct CrashReport: Sendable, Hashable {
    /// The crashed run's ids, release and OS.
    package var context: ReportContext
    /// The signal number (SIGSEGV, ...).
    package var signal: Int32
    /// si_code: how the signal came about (SEGV_MAPERR, SI_USER, ...).
    package var code: Int32
    /// si_errno.
    package var errorNumber: Int32
    /// The faulting address for faults; 0 for sent signals.
    package var faultAddress: UInt64
    /// For a signal sent by a process (kill, tgkill, abort): the sender's pid.
    package var senderPID: Int64?
    /// For a signal sent by a process: the sender's uid.
    package var senderUID: Int64?
    /// Kernel thread id of the crashing thread.
    package var threadID: UInt64
    /// Name of the crashing thread (from /proc, at most 15 bytes).
    package var threadName: String
    /// The crashing thread is the process's first thread.
    package var isMainThread: Bool
    /// When the crash happened, nanoseconds since the Unix epoch.
    package var timeUnixNano: UInt64
    /// The process's CPU time at the crash in user mode and in the kernel, in microseconds;
    /// nil in files written before the handler recorded it.
    package var cpuUserMicroseconds: UInt64?
    package var cpuSystemMicroseconds: UInt64?
    /// Program counter and stack pointer at the fault.
    package var pc: UInt64
    package var sp: UInt64
    /// Raw registers (x86-64: mcontext gregs order; arm64: x0-x30, sp, pc, pstate).
    package var registers: [UInt64]
    /// How the frames were found: "libunwind", "frame_pointer", "pc_only" or "none".
    package var unwinder: Unwinder
    /// The frames were unwound at the next launch, from the crash file's stack memory.
    package var unwoundAtNextLaunch = false
    /// How libunwind's attempt ended; when it did not finish, the frames are frame pointers'.
    package var unwindStatus: UnwindStatus = .notRecorded
    /// The crashing thread's stack, innermost first (frame 0 is the faulting pc).
    package var frames: [UInt64]
    /// More frames existed than the file holds.
    package var framesTruncated: Bool
    /// The images loaded at the crash.
    package var images: [LoadedImage]
    /// More images existed than the file holds.
    package var imagesTruncated: Bool
    /// The file was not committed (the handler died while writing): salvaged what was there.
    package var isPartial: Bool
    /// The handler itself faulted while writing (and the original crash was then chained).
    package var handlerFaulted: Bool = false
    /// Every thread of the process, the crashing one first (files of format version 2; empty
    /// in older files and when the capture recorded none).
    package var threads: [CrashThread] = []
    /// How the capture of every thread went; nil in files without it.
    package var threadCapture: ThreadCapture?
    /// The crashing thread's Swift async callers, when it ran in a task.
    package var asyncChain: SwiftAsyncChain?
    /// The machine's processors and the process's start; nil in files without them (a crash
    /// before start completed, or an older writer).
    package var machine: MachineInfo?
}

extension CrashReport {
    package init(
        context: ReportContext, info i: aft_crash_info, frames: [UInt64], framesTruncated: Bool,
        images: [LoadedImage], imagesTruncated: Bool, isPartial: Bool
    ) {
        var i = i
        self.context = context
        signal = i.signal
        code = i.code
        errorNumber = i.error_number
        faultAddress = i.fault_address
        senderPID = i.sender_pid >= 0 ? i.sender_pid : nil
        senderUID = i.sender_uid >= 0 ? i.sender_uid : nil
        threadID = i.thread_id
        threadName = CString.read(&i.thread_name)
        isMainThread = i.is_main_thread != 0
        timeUnixNano = i.time_realtime_ns
        let recorded = i.cpu_user_us != 0 || i.cpu_system_us != 0
        cpuUserMicroseconds = recorded ? i.cpu_user_us : nil
        cpuSystemMicroseconds = recorded ? i.cpu_system_us : nil
        pc = i.pc
        sp = i.sp
        let count = Int(min(i.register_count, AFT_MAX_REGISTERS))
        registers = withUnsafeBytes(of: &i.registers) { Array($0.bindMemory(to: UInt64.self).prefix(count)) }
        unwinder = Unwinder(code: i.unwinder)
        unwindStatus = UnwindStatus(code: i.unwind_status)
        self.frames = frames
        self.framesTruncated = framesTruncated
        self.images = images
        self.imagesTruncated = imagesTruncated
        self.isPartial = isPartial
    }

    /// The image that contains address, if any.
    package func image(containing address: UInt64) -> LoadedImage? {
        images.first { $0.contains(address) }
    }
}
