/// Writes a crash as a Linux minidump, the format Breakpad, Crashpad, rust-minidump
/// (minidump-stackwalk), LLDB and Sentry read.
///
/// Streams: SystemInfo, ThreadList (every thread, with its context and stack memory),
/// MemoryList (the same stacks again: LLDB reads memory only from it), ModuleList (every image,
/// with a Breakpad ELF CodeView record holding the GNU build id), Exception, ThreadNameList and
/// MiscInfo (the process id and start). All little-endian.
///
/// A thread's context follows what it has: every register (from a signal frame), only its
/// stack pointer and pc (from /proc/.../syscall, or for Aftermath's own threads as each noted
/// them before its wait; the flags say CONTROL only on x86-64), or none.
/// A thread without one is still listed, with an empty context location and no stack, as
/// sentry-native's minidump writer lists a thread it could not stop: Breakpad and Crashpad
/// leave such a thread out, losing its id and name. A file without thread records (format
/// version 1) gets one thread: the crashing one, from the report's own registers, without
/// stack memory.
package enum MinidumpWriter {
    /// Minidump stream types.
    package enum StreamType: UInt32, CaseIterable {
        case threadList = 3
        case moduleList = 4
        case memoryList = 5
        case exception = 6
        case systemInfo = 7
        case miscInfo = 15
        case threadNameList = 24
    }

    /// "MDMP".
    package static let signature: UInt32 = 0x504D_444D
    /// MINIDUMP_VERSION in the low 16 bits.
    package static let version: UInt32 = 0xA793
    /// The CodeView signature of Breakpad's ELF record ("BpEL"): then the raw GNU build id.
    package static let codeViewELF: UInt32 = 0x4270_454C
    /// SystemInfo's processor architecture: AMD64, Breakpad's ARM64 (older context layout),
    /// unknown.
    package static let architectureAMD64: UInt16 = 9
    package static let architectureARM64Old: UInt16 = 0x8003
    package static let architectureUnknown: UInt16 = 0xFFFF
    /// SystemInfo's platform id for Linux (Breakpad's value).
    package static let platformLinux: UInt32 = 0x8201

    /// Bounds on what one minidump holds, so that any report (however large its counts) gives
    /// a file whose offsets fit in 32 bits, and lists Breakpad's processor takes whole (it
    /// rejects a ThreadList of more than 4096 threads, a ModuleList of more than 2048 modules,
    /// and a module whose name is longer than 1024 UTF-16 units).
    package struct Limits: Sendable {
        package var threads = 4096
        package var modules = 2048
        /// Stack bytes per thread, kept from the stack pointer's end.
        package var stackBytesPerThread = 1 << 20
        /// Stack bytes in all; threads past it get no stack memory.
        package var stackBytes = 256 << 20
        package var pathUnits = 1024
        package var nameUnits = 256

        package init() {}
    }

    /// The minidump of `report`.
    package static func write(_ report: CrashReport, limits: Limits = Limits()) -> [UInt8] {
        var writer = Writer(report: report, limits: limits)
        return writer.run()
    }

    /// The threads the minidump lists, in the report's order, at most `limits.threads`: the
    /// crashing one always (built from the report's own registers when no thread of the report
    /// is it), no two with the same 32-bit id (readers reject the whole list for one).
    package static func threads(of report: CrashReport, limits: Limits = Limits()) -> [CrashThread] {
        let crashing = crashingIndex(report, report.threads)
        let cap = max(1, limits.threads) - (crashing == nil ? 1 : 0)
        // The crashing thread's id first: the report's own when none of its threads is it.
        var seen: Set<UInt32> = [UInt32(truncatingIfNeeded: crashing.map { report.threads[$0].id } ?? report.threadID)]
        var threads: [CrashThread] = []
        for (i, t) in report.threads.enumerated() {
            if i == crashing {
                threads.append(t)
            } else if threads.count + (crashing.map { $0 > i ? 1 : 0 } ?? 0) < cap,
                seen.insert(UInt32(truncatingIfNeeded: t.id)).inserted
            {
                threads.append(t)
            }
        }
        if crashing == nil {
            let crashed = CrashThread(
                id: report.threadID, name: report.threadName, crashed: true, isMain: report.isMainThread,
                alsoCrashedSignal: nil, isAftermath: false, state: "R",
                contextSource: report.registers.isEmpty ? .none : .crash, missingContext: nil,
                pc: report.pc, sp: report.sp, registers: report.registers, fpState: [], syscallNumber: nil,
                unwinder: report.unwinder, unwindStatus: report.unwindStatus, frames: report.frames,
                framesTruncated: report.framesTruncated, stackStart: 0, stack: [], stackTruncated: false)
            threads.insert(crashed, at: 0)
        }
        return threads
    }

    /// SystemInfo's 24-byte CPU union: x86-64, cpuid's vendor, version and feature words; arm64, MIDR_EL1 and the low half of AT_HWCAP; zeros
    /// where the file has no machine section.
    static func cpuInformation(_ machine: MachineInfo?, architecture: Architecture) -> [UInt8] {
        var words = [UInt32](repeating: 0, count: 6)
        if let m = machine {
            switch architecture {
            case .x86_64:
                let vendor = Array(m.cpuVendor.utf8.prefix(12)) + [UInt8](repeating: 0, count: 12)
                for i in 0..<3 {
                    words[i] = (0..<4).reduce(0) { $0 | UInt32(vendor[4 * i + $1]) << (8 * UInt32($1)) }
                }
                words[3] = m.cpuSignature
                words[4] = m.cpuFeatures  // the AMD extended features word stays 0, as Breakpad's
            case .arm64:
                words[0] = m.cpuSignature
                words[1] = UInt32(truncatingIfNeeded: m.hardwareCapabilities)
            default: break
            }
        }
        return words.flatMap { w in (0..<4).map { UInt8(truncatingIfNeeded: w >> (8 * $0)) } }
    }

    static func crashingIndex(_ report: CrashReport, _ threads: [CrashThread]) -> Int? {
        threads.firstIndex { $0.crashed } ?? threads.firstIndex { $0.id == report.threadID }
    }

    /// The context a thread's registers give, nil for none.
    static func content(of t: CrashThread) -> MinidumpContext.Content? {
        switch t.contextSource {
        case .signal, .crash:
            if !t.registers.isEmpty { return .full(registers: t.registers, fpState: t.fpState) }
        case .syscall:
            // sp, pc and the frame pointer found above sp: the readers' unwind tables take it
            // from there as from a full context.
            if !t.registers.isEmpty { return .full(registers: t.registers, fpState: []) }
        case .parked, .none:
            break
        }
        return t.sp != 0 || t.pc != 0 ? .stackAndPC(sp: t.sp, pc: t.pc) : nil
    }

    /// The images in ModuleList order: the main executable first (readers take the first
    /// module as the process's), then by address.
    static func modules(_ report: CrashReport, limits: Limits) -> [LoadedImage] {
        let sorted = report.images.enumerated().sorted { a, b in
            if a.element.isMainExecutable != b.element.isMainExecutable { return a.element.isMainExecutable }
            return a.element.start != b.element.start ? a.element.start < b.element.start : a.offset < b.offset
        }
        // Breakpad's processor rejects the whole list for one module of no size, or one that
        // overlaps another: those are left out (the main executable, first, is kept).
        var kept: [LoadedImage] = []
        var ranges: [(start: UInt64, end: UInt64)] = []
        for image in sorted.map(\.element) where kept.count < max(0, limits.modules) && image.end > image.start {
            let end = image.start + min(image.end - image.start, UInt64(UInt32.max))
            guard !ranges.contains(where: { image.start < $0.end && $0.start < end }) else { continue }
            kept.append(image)
            ranges.append((image.start, end))
        }
        return kept
    }

    /// The bytes of an image's CodeView record, nil when it has no GNU build id (a text hash is
    /// not Breakpad's id, which hashes the .text section, so it gets none).
    package static func codeView(_ image: LoadedImage) -> [UInt8]? {
        guard !image.isBuildIDTextHash, let id = Hex.decode(image.buildID), !id.isEmpty else { return nil }
        var b = MinidumpBuffer()
        b.u32(codeViewELF)
        b.append(Array(id.prefix(255)))
        return b.bytes
    }

    /// Kernel release "6.1.0-18-amd64" as major, minor, build (0 for what is missing).
    static func kernelVersion(_ release: String) -> (UInt32, UInt32, UInt32) {
        let numbers =
            release.split(separator: "-", maxSplits: 1).first.map {
                $0.split(separator: ".").prefix(3).map { UInt32($0.prefix { $0.isASCII && $0.isNumber }) ?? 0 }
            } ?? []
        func at(_ i: Int) -> UInt32 { i < numbers.count ? numbers[i] : 0 }
        return (at(0), at(1), at(2))
    }
}

/// One minidump being written: the header and directory first, then each stream with the data
/// it points at.
private struct Writer {
    let report: CrashReport
    let limits: MinidumpWriter.Limits
    var out = MinidumpBuffer()
    var directory: [(type: UInt32, location: MinidumpLocation)] = []
    /// Each listed thread's stack memory: start address and where its bytes are.
    var stacks: [(start: UInt64, location: MinidumpLocation)] = []
    var crashContext = MinidumpLocation.none
    var crashThreadID: UInt32?

    init(report: CrashReport, limits: MinidumpWriter.Limits) {
        self.report = report
        self.limits = limits
    }

    mutating func run() -> [UInt8] {
        let streamCount = MinidumpWriter.StreamType.allCases.count
        out.u32(MinidumpWriter.signature)
        out.u32(MinidumpWriter.version)
        out.u32(UInt32(streamCount))
        out.u32(32)
        out.u32(0)
        out.u32(UInt32(truncatingIfNeeded: report.timeUnixNano / 1_000_000_000))
        out.u64(0)
        out.zeros(12 * streamCount)
        systemInfo()
        threadList()
        memoryList()
        exception()
        moduleList()
        threadNames()
        miscInfo()
        for (i, entry) in directory.enumerated() {
            out.set32(entry.type, at: 32 + 12 * i)
            out.set32(entry.location.size, at: 32 + 12 * i + 4)
            out.set32(entry.location.rva, at: 32 + 12 * i + 8)
        }
        return out.bytes
    }

    /// Starts a stream: its fixed part goes next, 8-aligned.
    mutating func begin(_ type: MinidumpWriter.StreamType) {
        out.align(8)
        directory.append((type.rawValue, MinidumpLocation(size: 0, rva: out.rva)))
    }

    /// Ends the stream last begun: its fixed part's size (what follows it is data it points at).
    mutating func end(size: Int) {
        directory[directory.count - 1].location.size = UInt32(size)
    }

    /// A stream that is a u32 count and that many entries of entrySize bytes, zeroed: the
    /// caller fills them in. Returns the first entry's offset.
    mutating func table(_ type: MinidumpWriter.StreamType, count: Int, entrySize: Int) -> Int {
        begin(type)
        out.u32(UInt32(count))
        let entries = out.count
        out.zeros(entrySize * count)
        end(size: 4 + entrySize * count)
        return entries
    }

    mutating func systemInfo() {
        begin(.systemInfo)
        let arch = report.context.architecture
        let c = report.context
        out.u16(
            arch == .x86_64
                ? MinidumpWriter.architectureAMD64
                : arch == .arm64 ? MinidumpWriter.architectureARM64Old : MinidumpWriter.architectureUnknown)
        let machine = report.machine
        let x86 = arch == .x86_64 ? machine?.x86Identity : nil
        out.u16(UInt16(truncatingIfNeeded: x86?.family ?? 0))  // processor level
        out.u16(UInt16(truncatingIfNeeded: (x86?.model ?? 0) << 8 | (x86?.stepping ?? 0)))  // revision
        out.u8(UInt8(min(machine?.cpuCount ?? 0, 255)))  // processors: 0 where the file has none
        out.u8(0)  // product type
        let (major, minor, build) = MinidumpWriter.kernelVersion(c.kernelRelease)
        out.u32(major)
        out.u32(minor)
        out.u32(build)
        out.u32(MinidumpWriter.platformLinux)
        let versionAt = out.count
        out.u32(0)  // version string RVA
        out.u16(0)  // suite mask
        out.u16(0)
        out.append(MinidumpWriter.cpuInformation(machine, architecture: arch))
        end(size: 56)
        // Breakpad's "sysname release version machine", with os-release's name and version as
        // the version (the kernel's uname -v is not recorded).
        let text = ["Linux", c.kernelRelease, c.osName, c.osVersion, arch == .unknown ? "" : arch.rawValue]
            .filter { !$0.isEmpty }.joined(separator: " ")
        out.set32(out.string(text, maximumUnits: limits.pathUnits), at: versionAt)
    }

    mutating func threadList() {
        let threads = MinidumpWriter.threads(of: report, limits: limits)
        let crashing = MinidumpWriter.crashingIndex(report, threads)
        let entries = table(.threadList, count: threads.count, entrySize: 48)
        var stackBudget = max(0, limits.stackBytes)
        for (i, t) in threads.enumerated() {
            let at = entries + 48 * i
            out.set32(UInt32(truncatingIfNeeded: t.id), at: at)
            var context = MinidumpLocation.none
            if let content = MinidumpWriter.content(of: t),
                let blob = MinidumpContext.blob(content, architecture: report.context.architecture)
            {
                context = MinidumpLocation(size: UInt32(blob.count), rva: out.blob(blob))
            }
            out.set32(context.size, at: at + 40)
            out.set32(context.rva, at: at + 44)
            if i == crashing {
                crashContext = context
                crashThreadID = UInt32(truncatingIfNeeded: t.id)
            }
            // The stack kept from its start (the stack pointer's end), within the budgets, and
            // only when its end is an address.
            let size = min(t.stack.count, max(0, limits.stackBytesPerThread), stackBudget)
            guard size > 0, t.stackStart.addingReportingOverflow(UInt64(size)).overflow == false else { continue }
            stackBudget -= size
            let memory = MinidumpLocation(size: UInt32(size), rva: out.blob(Array(t.stack.prefix(size))))
            out.set64(t.stackStart, at: at + 24)
            out.set32(memory.size, at: at + 32)
            out.set32(memory.rva, at: at + 36)
            // The MemoryList's ranges must not overlap (Breakpad drops the list otherwise); the
            // thread keeps its own stack descriptor either way.
            let end = t.stackStart + UInt64(size)
            if !stacks.contains(where: { t.stackStart < $0.start + UInt64($0.location.size) && $0.start < end }) {
                stacks.append((t.stackStart, memory))
            }
        }
    }

    mutating func memoryList() {
        begin(.memoryList)
        out.u32(UInt32(stacks.count))
        for s in stacks {
            out.u64(s.start)
            out.u32(s.location.size)
            out.u32(s.location.rva)
        }
        end(size: 4 + 16 * stacks.count)
    }

    mutating func exception() {
        begin(.exception)
        out.u32(crashThreadID ?? UInt32(truncatingIfNeeded: report.threadID))  // whose context follows
        out.u32(0)
        out.u32(UInt32(bitPattern: report.signal))  // the signal number
        out.u32(UInt32(bitPattern: report.code))  // si_code
        out.u64(0)  // no nested exception record
        out.u64(report.faultAddress)
        out.u32(0)  // no parameters
        out.u32(0)
        out.zeros(15 * 8)
        out.u32(crashContext.size)
        out.u32(crashContext.rva)
        end(size: 168)
    }

    mutating func moduleList() {
        let modules = MinidumpWriter.modules(report, limits: limits)
        let entries = table(.moduleList, count: modules.count, entrySize: 108)
        for (i, image) in modules.enumerated() {
            let at = entries + 108 * i
            let size = image.end > image.start ? min(image.end - image.start, UInt64(UInt32.max)) : 0
            out.set64(image.start, at: at)
            out.set32(UInt32(size), at: at + 8)
            out.set32(out.string(image.path, maximumUnits: limits.pathUnits), at: at + 20)
            if let record = MinidumpWriter.codeView(image) {
                out.set32(UInt32(record.count), at: at + 76)
                out.set32(out.blob(record), at: at + 80)
            }
        }
    }

    mutating func threadNames() {
        let named = MinidumpWriter.threads(of: report, limits: limits).filter { !$0.name.isEmpty }
        let entries = table(.threadNameList, count: named.count, entrySize: 12)
        for (i, t) in named.enumerated() {
            out.set32(UInt32(truncatingIfNeeded: t.id), at: entries + 12 * i)
            out.set64(UInt64(out.string(t.name, maximumUnits: limits.nameUnits)), at: entries + 12 * i + 4)
        }
    }

    /// MINIDUMP_MISC_INFO: the process id, and its start with its user and kernel CPU time at
    /// the crash (whole seconds) where the file has both (readers show the uptime from the
    /// start; the one flag covers the three).
    mutating func miscInfo() {
        begin(.miscInfo)
        let start = report.machine?.processStartUnixNano.map { UInt32(clamping: $0 / 1_000_000_000) }
        let user = report.cpuUserMicroseconds, system = report.cpuSystemMicroseconds
        let times = start != nil && user != nil && system != nil
        out.u32(24)
        out.u32(times ? 3 : 1)  // MINIDUMP_MISC1_PROCESS_ID, | MINIDUMP_MISC1_PROCESS_TIMES
        out.u32(UInt32(truncatingIfNeeded: report.context.pid))
        out.u32(times ? start ?? 0 : 0)
        out.u32(times ? UInt32(clamping: (user ?? 0) / 1_000_000) : 0)
        out.u32(times ? UInt32(clamping: (system ?? 0) / 1_000_000) : 0)
        end(size: 24)
    }
}
