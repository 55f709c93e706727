import AftermathNextLaunch
import CSignalShim
import Foundation
import Testing
import TestSupport

/// The minidump writer's bytes, read back field by field (no reader needed), and its bounds
/// under absurd input.
@Suite struct MinidumpWriterTests {
    /// A minidump read back: its directory and little-endian fields.
    struct Dump {
        var bytes: [UInt8]
        var streams: [UInt32: (size: Int, rva: Int)] = [:]

        init(_ bytes: [UInt8]) throws {
            self.bytes = bytes
            try #require(bytes.count >= 32)
            let count = Int(u32(8)), directory = Int(u32(12))
            try #require(directory + 12 * count <= bytes.count)
            for i in 0..<count {
                let at = directory + 12 * i
                let (size, rva) = (Int(u32(at + 4)), Int(u32(at + 8)))
                try #require(rva + size <= bytes.count, "stream \(u32(at)) past the end")
                streams[u32(at)] = (size, rva)
            }
        }

        func u16(_ at: Int) -> UInt16 { UInt16(bytes[at]) | UInt16(bytes[at + 1]) << 8 }
        func u32(_ at: Int) -> UInt32 { (0..<4).reduce(0) { $0 | UInt32(bytes[at + $1]) << (8 * UInt32($1)) } }
        func u64(_ at: Int) -> UInt64 { UInt64(u32(at)) | UInt64(u32(at + 4)) << 32 }
        func stream(_ type: MinidumpWriter.StreamType) -> (size: Int, rva: Int)? { streams[type.rawValue] }

        /// A MINIDUMP_STRING at rva.
        func string(_ rva: Int) throws -> String {
            let length = Int(u32(rva))
            try #require(length % 2 == 0 && rva + 4 + length + 2 <= bytes.count)
            let units = (0..<length / 2).map { u16(rva + 4 + 2 * $0) }
            #expect(u16(rva + 4 + length) == 0, "string without its NUL")
            return String(decoding: units, as: UTF16.self)
        }

        func slice(_ rva: Int, _ size: Int) -> [UInt8] { Array(bytes[rva..<rva + size]) }
    }

    static func context(_ arch: Architecture) -> ReportContext {
        ReportContext(
            reportID: UUID(), sessionID: UUID(), runID: UUID(), pid: 4242, startTimeUnixNano: 1_700_000_000_000_000_000,
            serviceName: "shop", serviceVersion: "1.2", appBuildID: "f729704bd8d823660be9cb096d5f093f9d1cd872",
            osName: "Debian GNU/Linux", osVersion: "12", kernelRelease: "6.1.0-18-amd64", architecture: arch,
            executablePath: "/opt/shop/bin/shop", appRoot: "/opt/shop")
    }

    static func image(
        _ start: UInt64, _ end: UInt64, _ path: String, _ id: String, main: Bool = false, textHash: Bool = false
    )
        -> aft_image
    {
        var i = aft_image()
        i.start = start
        i.end = end
        CString.write(path, into: &i.path)
        let bytes = Hex.decode(id) ?? []
        withUnsafeMutableBytes(of: &i.build_id) { raw in
            for (n, b) in bytes.prefix(raw.count).enumerated() { raw[n] = b }
        }
        i.build_id_size = UInt32(min(bytes.count, Int(AFT_BUILD_ID_CAPACITY)))
        i.flags = (main ? UInt32(AFT_IMAGE_MAIN_EXECUTABLE) : 0) | (textHash ? UInt32(AFT_IMAGE_BUILD_ID_TEXT_HASH) : 0)
        return i
    }

    /// A crash on x86-64 or arm64 with three threads: the crashed one (every register and the FP
    /// state), one with sp and pc only, one without a context.
    static func report(_ arch: Architecture, threads: Bool = true) -> CrashReport {
        var info = aft_crash_info()
        info.signal = SIGSEGV
        info.code = 1
        info.fault_address = 0x18
        info.thread_id = 101
        info.time_realtime_ns = 1_700_000_000_123_456_789
        info.pc = 0x5555_0000_1234
        info.sp = 0x7ffd_0000_1000
        let registers = (0..<UInt64(arch == .arm64 ? 34 : 23)).map { 0x1000 + $0 }
        info.register_count = UInt32(registers.count)
        withUnsafeMutableBytes(of: &info.registers) { raw in
            for (i, r) in registers.enumerated() { raw.storeBytes(of: r, toByteOffset: 8 * i, as: UInt64.self) }
        }
        let images = [
            image(0x7f00_0000_0000, 0x7f00_0020_0000, "/usr/lib/x86_64-linux-gnu/libc.so.6", "aabbccdd"),
            image(
                0x5555_0000_0000, 0x5555_0010_0000, "/opt/shop/bin/shop", "f729704bd8d823660be9cb096d5f093f9d1cd872",
                main: true),
            image(
                0x7f00_1000_0000, 0x7f00_1000_4000, "/opt/shop/lib/libnoid.so", "00112233445566778899aabbccddeeff",
                textHash: true),
        ].map(LoadedImage.init)
        var r = CrashReport(
            context: context(arch), info: info, frames: [info.pc], framesTruncated: false, images: images,
            imagesTruncated: false, isPartial: false)
        guard threads else { return r }
        let crashed = CrashFileBuilder.thread(
            id: 101, name: "worker-1", flags: UInt32(AFT_THREAD_CRASHED), source: UInt32(AFT_THREAD_CONTEXT_CRASH),
            state: "R", pc: info.pc, sp: info.sp, registers: registers)
        var t0 = CrashThread(
            record: crashed, frames: [info.pc], stackStart: info.sp - 128, stack: (0..<300).map { UInt8($0 & 0xFF) })
        t0.fpState = (0..<(arch == .arm64 ? 520 : 512)).map { UInt8(($0 * 7) & 0xFF) }
        let blocked = CrashFileBuilder.thread(
            id: 102, name: "blocked", source: UInt32(AFT_THREAD_CONTEXT_SYSCALL),
            why: UInt32(AFT_THREAD_WHY_BLOCKS_SIGNAL), pc: 0x7f00_0000_4321, sp: 0x7ffd_1000_2000)
        let t1 = CrashThread(
            record: blocked, frames: [0x7f00_0000_4321], stackStart: 0x7ffd_1000_2000 - 128, stack: [1, 2, 3, 4])
        let silent = CrashFileBuilder.thread(
            id: 103, name: "silent ✓", source: UInt32(AFT_THREAD_CONTEXT_NONE), why: UInt32(AFT_THREAD_WHY_NO_ANSWER))
        r.threads = [t0, t1, CrashThread(record: silent, frames: [], stackStart: 0, stack: [])]
        return r
    }

    @Test("Header, directory and every stream's size and place")
    func layout() throws {
        let r = Self.report(.x86_64)
        let d = try Dump(MinidumpWriter.write(r))
        #expect(d.u32(0) == 0x504D_444D && d.u32(4) & 0xFFFF == 0xA793)
        #expect(d.u32(8) == 7 && d.u32(12) == 32)
        #expect(d.u32(20) == 1_700_000_000)
        let sizes: [MinidumpWriter.StreamType: Int] = [
            .systemInfo: 56, .threadList: 4 + 48 * 3, .memoryList: 4 + 16 * 2, .exception: 168,
            .moduleList: 4 + 108 * 3, .threadNameList: 4 + 12 * 3, .miscInfo: 24,
        ]
        for (type, size) in sizes { #expect(d.stream(type)?.size == size, "\(type)") }

        let s = try #require(d.stream(.systemInfo)).rva
        #expect(d.u16(s) == 9 && d.u32(s + 20) == 0x8201)
        #expect(d.u32(s + 8) == 6 && d.u32(s + 12) == 1 && d.u32(s + 16) == 0)
        #expect(try d.string(Int(d.u32(s + 24))) == "Linux 6.1.0-18-amd64 Debian GNU/Linux 12 x86_64")

        let misc = try #require(d.stream(.miscInfo)).rva
        #expect(d.u32(misc) == 24 && d.u32(misc + 4) == 1 && d.u32(misc + 8) == 4242)
    }

    @Test("ThreadList: AMD64 contexts by what each thread has; stacks in ThreadList and MemoryList alike")
    func threadsAMD64() throws {
        let r = Self.report(.x86_64)
        let d = try Dump(MinidumpWriter.write(r))
        let list = try #require(d.stream(.threadList)).rva
        #expect(d.u32(list) == 3)
        let t = (0..<3).map { list + 4 + 48 * $0 }
        #expect(t.map { d.u32($0) } == [101, 102, 103])
        // The crashed thread: every register where CONTEXT_AMD64 keeps it, and the FXSAVE area.
        #expect(d.u32(t[0] + 40) == 1232)
        let c = Int(d.u32(t[0] + 44))
        #expect(c % 8 == 0)
        #expect(d.u32(c + 0x30) == 0x0010_000F)
        let gregs = r.threads[0].registers
        let order = [13, 14, 12, 11, 15, 10, 9, 8, 0, 1, 2, 3, 4, 5, 6, 7]  // rax rcx rdx rbx rsp rbp rsi rdi r8-r15
        #expect(order.enumerated().allSatisfy { d.u64(c + 0x78 + 8 * $0.offset) == gregs[$0.element] })
        #expect(d.u64(c + 0xF8) == gregs[16])
        #expect(d.u32(c + 0x44) == UInt32(gregs[17]))
        #expect(d.u16(c + 0x38) == UInt16(gregs[18] & 0xFFFF))
        #expect(d.slice(c + 0x100, 512) == r.threads[0].fpState)
        #expect(d.u32(c + 0x34) == d.u32(c + 0x100 + 24))
        // sp and pc only: CONTROL and nothing else.
        let c1 = Int(d.u32(t[1] + 44))
        #expect(d.u32(t[1] + 40) == 1232 && d.u32(c1 + 0x30) == 0x0010_0001)
        #expect(d.u64(c1 + 0x98) == 0x7ffd_1000_2000 && d.u64(c1 + 0xF8) == 0x7f00_0000_4321)
        #expect((d.slice(c1 + 0x78, 0x20) + d.slice(c1 + 0xA0, 0x58)).allSatisfy { $0 == 0 })
        // No context: an empty location, no stack.
        #expect(d.u32(t[2] + 40) == 0 && d.u32(t[2] + 44) == 0 && d.u32(t[2] + 32) == 0)

        let memory = try #require(d.stream(.memoryList)).rva
        #expect(d.u32(memory) == 2)
        for (i, thread) in r.threads.prefix(2).enumerated() {
            let stack = t[i] + 24
            #expect(d.u64(stack) == thread.stackStart && Int(d.u32(stack + 8)) == thread.stack.count)
            #expect(d.slice(Int(d.u32(stack + 12)), thread.stack.count) == thread.stack)
            #expect(d.slice(memory + 4 + 16 * i, 16) == d.slice(stack, 16), "MemoryList differs from ThreadList")
        }

        let names = try #require(d.stream(.threadNameList)).rva
        #expect(d.u32(names) == 3)
        let decoded = try (0..<3).map { i in
            (d.u32(names + 4 + 12 * i), try d.string(Int(d.u64(names + 4 + 12 * i + 4))))
        }
        #expect(decoded.map(\.0) == [101, 102, 103] && decoded.map(\.1) == ["worker-1", "blocked", "silent ✓"])
    }

    @Test("Exception: the crashing thread, the signal as code, si_code as flags, the address, its context")
    func exception() throws {
        let d = try Dump(MinidumpWriter.write(Self.report(.x86_64)))
        let e = try #require(d.stream(.exception)).rva
        let list = try #require(d.stream(.threadList)).rva
        #expect(d.u32(e) == 101 && d.u32(e + 8) == 11 && d.u32(e + 12) == 1)
        #expect(d.u64(e + 16) == 0 && d.u64(e + 24) == 0x18 && d.u32(e + 32) == 0)
        #expect(d.slice(e + 160, 8) == d.slice(list + 4 + 40, 8))
    }

    @Test("ModuleList: the main executable first; a BpEL record with the GNU build id, none for a text hash")
    func modules() throws {
        let r = Self.report(.x86_64)
        let d = try Dump(MinidumpWriter.write(r))
        let list = try #require(d.stream(.moduleList)).rva
        #expect(d.u32(list) == 3)
        let m = (0..<3).map { list + 4 + 108 * $0 }
        #expect(
            try m.map { try d.string(Int(d.u32($0 + 20))) }
                == ["/opt/shop/bin/shop", "/usr/lib/x86_64-linux-gnu/libc.so.6", "/opt/shop/lib/libnoid.so"])
        #expect(d.u64(m[0]) == 0x5555_0000_0000 && d.u32(m[0] + 8) == 0x10_0000)
        let cv = Int(d.u32(m[0] + 80))
        #expect(d.u32(m[0] + 76) == 24)
        #expect(d.slice(cv, 24) == [0x4C, 0x45, 0x70, 0x42] + Hex.decode("f729704bd8d823660be9cb096d5f093f9d1cd872")!)
        #expect(d.u32(m[1] + 76) == 8 && d.slice(Int(d.u32(m[1] + 80)) + 4, 4) == [0xAA, 0xBB, 0xCC, 0xDD])
        #expect(d.u32(m[2] + 76) == 0 && d.u32(m[2] + 80) == 0)
        #expect(d.slice(m[0] + 24, 52).allSatisfy { $0 == 0 } && d.slice(m[0] + 84, 24).allSatisfy { $0 == 0 })
    }

    @Test("arm64: SystemInfo 0x8003 and Breakpad's 796-byte context")
    func arm64() throws {
        let r = Self.report(.arm64)
        let d = try Dump(MinidumpWriter.write(r))
        #expect(d.u16(try #require(d.stream(.systemInfo)).rva) == 0x8003)
        let list = try #require(d.stream(.threadList)).rva
        let c = Int(d.u32(list + 4 + 44))
        #expect(d.u32(list + 4 + 40) == 796 && d.u64(c) == 0x8000_0006)
        let regs = r.threads[0].registers
        #expect((0..<33).allSatisfy { d.u64(c + 8 + 8 * $0) == regs[$0] })
        #expect(d.u32(c + 272) == UInt32(regs[33]))
        #expect(d.slice(c + 276, 520) == r.threads[0].fpState)
        let c1 = Int(d.u32(list + 4 + 48 + 44))
        #expect(d.u64(c1) == 0x8000_0002 && d.u64(c1 + 8 + 8 * 31) == 0x7ffd_1000_2000)
        #expect(d.u64(c1 + 8 + 8 * 32) == 0x7f00_0000_4321)
    }

    @Test("A version-1 report: one thread, the crashing one, from the report's own registers")
    func versionOne() throws {
        let r = Self.report(.x86_64, threads: false)
        let d = try Dump(MinidumpWriter.write(r))
        let list = try #require(d.stream(.threadList)).rva
        #expect(d.u32(list) == 1 && d.u32(list + 4) == 101)
        let c = Int(d.u32(list + 4 + 44))
        #expect(d.u32(list + 4 + 40) == 1232 && d.u32(c + 0x30) == 0x0010_0007)
        #expect(d.u64(c + 0xF8) == r.registers[16] && d.u64(c + 0x98) == r.registers[15])
        #expect(d.u32(list + 4 + 32) == 0)
        #expect(d.u32(try #require(d.stream(.memoryList)).rva) == 0)
        let e = try #require(d.stream(.exception)).rva
        #expect(d.slice(e + 160, 8) == d.slice(list + 4 + 40, 8))
        #expect(MinidumpWriter.threads(of: r).map(\.crashed) == [true])
    }

    @Test("SystemInfo and MiscInfo from the crash file's machine: processors, cpuid, the process's start")
    func machine() throws {
        var system = aft_system_info()
        system.cpu_count = 12
        system.cpu_signature = 0x000C_06F2  // family 6, extended model 0xC, model 0xF, stepping 2
        system.cpu_features = 0x1F8B_FBFF
        CString.write("GenuineIntel", into: &system.cpu_vendor)
        system.process_start_realtime_ns = 1_699_999_000_123_456_789
        let r = Self.report(.x86_64)
        let file = try ReportFile.decode(
            CrashFileBuilder.crashFile(
                context: Self.cContext(r.context), crash: aft_crash_info(), frames: [], images: [], threads: [],
                threadFrames: [], stacks: [], system: system))
        let machine = try #require(try file.crashReport().machine)
        #expect(machine.cpuCount == 12 && machine.cpuVendor == "GenuineIntel")
        #expect(machine.x86Identity.map { [$0.family, $0.model, $0.stepping] } == [6, 0xCF, 2])

        var withMachine = r
        withMachine.machine = machine
        withMachine.cpuUserMicroseconds = 2_700_000
        withMachine.cpuSystemMicroseconds = 1_200_000
        let d = try Dump(MinidumpWriter.write(withMachine))
        let s = try #require(d.stream(.systemInfo)).rva
        #expect(d.u16(s + 2) == 6 && d.u16(s + 4) == 0xCF02 && d.bytes[s + 6] == 12)
        #expect(d.slice(s + 32, 12) == Array("GenuineIntel".utf8))
        #expect(d.u32(s + 44) == 0x000C_06F2 && d.u32(s + 48) == 0x1F8B_FBFF && d.u32(s + 52) == 0)
        let misc = try #require(d.stream(.miscInfo)).rva
        #expect(d.u32(misc + 4) == 3 && d.u32(misc + 8) == 4242 && d.u32(misc + 12) == 1_699_999_000)
        #expect(d.u32(misc + 16) == 2 && d.u32(misc + 20) == 1, "whole seconds of user and kernel time")
        // The start without the CPU times (a file from before they were recorded): the flag that
        // covers the three is not set, and nothing stands in for them.
        withMachine.cpuUserMicroseconds = nil
        withMachine.cpuSystemMicroseconds = nil
        let old = try Dump(MinidumpWriter.write(withMachine))
        let oldMisc = try #require(old.stream(.miscInfo)).rva
        #expect(old.u32(oldMisc + 4) == 1 && old.u32(oldMisc + 12) == 0 && old.u32(oldMisc + 16) == 0)

        // arm64: MIDR_EL1 and the capabilities in Breakpad's ARM union; a huge count clamped.
        var arm = Self.report(.arm64)
        arm.machine = MachineInfo(cpuCount: 300, cpuSignature: 0x410F_D083, hardwareCapabilities: 0xEFF)
        let a = try Dump(MinidumpWriter.write(arm))
        let sa = try #require(a.stream(.systemInfo)).rva
        #expect(a.bytes[sa + 6] == 255 && a.u32(sa + 32) == 0x410F_D083 && a.u32(sa + 36) == 0xEFF)
        let armMisc = try #require(a.stream(.miscInfo)).rva
        #expect(a.u16(sa + 2) == 0 && a.u32(armMisc + 4) == 1)

        // A file without the section: no machine, and the streams say nothing of one.
        let bare = try ReportFile.decode(
            CrashFileBuilder.crashFile(
                context: Self.cContext(r.context), crash: aft_crash_info(), frames: [], images: [], threads: [],
                threadFrames: [], stacks: []))
        #expect(try bare.crashReport().machine == nil)
    }

    static func cContext(_ c: ReportContext) -> aft_context {
        var out = aft_context()
        out.pid = UInt64(c.pid)
        out.arch = c.architecture.code
        return out
    }
}
