/// The CPU context blobs of a minidump's threads, from the registers a crash file records.
///
/// x86-64: CONTEXT_AMD64 (1232 bytes). arm64: Breakpad's older layout (796 bytes, flags
/// 0x80000000), the one minidump-stackwalk and LLDB both read in full when SystemInfo's
/// architecture is 0x8003.
enum MinidumpContext {
    /// The registers a thread has: all of them, only its stack pointer and pc, or none.
    enum Content {
        case full(registers: [UInt64], fpState: [UInt8])
        case stackAndPC(sp: UInt64, pc: UInt64)
    }

    static let amd64Size = 1232
    static let arm64OldSize = 796

    // CONTEXT_AMD64 flags: the architecture bit, then what is present.
    static let amd64 = UInt32(0x0010_0000)
    static let amd64Control = amd64 | 0x1
    static let amd64Integer = amd64 | 0x2
    static let amd64Segments = amd64 | 0x4
    static let amd64FloatingPoint = amd64 | 0x8

    // Breakpad's older ARM64 flags (a u64 field).
    static let arm64Old = UInt64(0x8000_0000)
    static let arm64OldInteger = arm64Old | 0x2
    static let arm64OldFloatingPoint = arm64Old | 0x4

    /// glibc's mcontext gregs indices (<sys/ucontext.h>): REG_R8 = 0 ... REG_CR2 = 22.
    enum AMD64Register: Int {
        case r8 = 0, r9, r10, r11, r12, r13, r14, r15, rdi, rsi, rbp, rbx, rdx, rax, rcx, rsp, rip
        case eflags, csgsfs, err, trapno, oldmask, cr2
    }

    /// The context blob for `content`, nil for an architecture without a minidump layout here.
    static func blob(_ content: Content, architecture: Architecture) -> [UInt8]? {
        switch architecture {
        case .x86_64: return amd64Blob(content)
        case .arm64: return arm64OldBlob(content)
        case .unknown: return nil
        }
    }

    /// CONTEXT_AMD64. A full context has every general register, eflags, cs/fs/gs from the
    /// packed csgsfs word, and, with a 512-byte FXSAVE area, mxcsr and the area itself. With only
    /// sp and pc, the flags say CONTROL and nothing else.
    static func amd64Blob(_ content: Content) -> [UInt8] {
        var b = [UInt8](repeating: 0, count: amd64Size)
        func put64(_ v: UInt64, _ offset: Int) { withUnsafeBytes(of: v.littleEndian) { b.replace(offset, $0) } }
        func put32(_ v: UInt32, _ offset: Int) { withUnsafeBytes(of: v.littleEndian) { b.replace(offset, $0) } }
        func put16(_ v: UInt16, _ offset: Int) { withUnsafeBytes(of: v.littleEndian) { b.replace(offset, $0) } }
        switch content {
        case .stackAndPC(let sp, let pc):
            put32(amd64Control, 0x30)
            put64(sp, 0x98)
            put64(pc, 0xF8)
        case .full(let registers, let fpState):
            func reg(_ r: AMD64Register) -> UInt64 { r.rawValue < registers.count ? registers[r.rawValue] : 0 }
            var flags = amd64Control | amd64Integer
            if registers.count > AMD64Register.csgsfs.rawValue { flags |= amd64Segments }
            // CONTEXT_AMD64's order: rax rcx rdx rbx rsp rbp rsi rdi r8-r15, at 0x78.
            let order: [AMD64Register] = [
                .rax, .rcx, .rdx, .rbx, .rsp, .rbp, .rsi, .rdi, .r8, .r9, .r10, .r11, .r12, .r13, .r14, .r15,
            ]
            for (i, r) in order.enumerated() { put64(reg(r), 0x78 + 8 * i) }
            put64(reg(.rip), 0xF8)
            put32(UInt32(truncatingIfNeeded: reg(.eflags)), 0x44)
            // csgsfs packs cs (bits 0-15), gs (16-31), fs (32-47).
            let segments = reg(.csgsfs)
            put16(UInt16(truncatingIfNeeded: segments), 0x38)
            put16(UInt16(truncatingIfNeeded: segments >> 32), 0x3E)
            put16(UInt16(truncatingIfNeeded: segments >> 16), 0x40)
            if fpState.count == 512 {
                flags |= amd64FloatingPoint
                b.replace(0x100, fpState)
                // FXSAVE keeps mxcsr at offset 24; CONTEXT_AMD64 repeats it at 0x34.
                put32(fpState.u32(at: 24), 0x34)
            }
            put32(flags, 0x30)
        }
        return b
    }

    /// Breakpad's older ARM64 context (pack(4)): u64 flags; x0-x28, fp, lr, sp, pc; u32 cpsr;
    /// u32 fpsr; u32 fpcr; v0-v31. The recorded order is x0-x30, sp, pc, pstate; the FP state
    /// is fpsr, fpcr, v0-v31, the same as the context's tail.
    static func arm64OldBlob(_ content: Content) -> [UInt8] {
        var b = [UInt8](repeating: 0, count: arm64OldSize)
        func put64(_ v: UInt64, _ offset: Int) { withUnsafeBytes(of: v.littleEndian) { b.replace(offset, $0) } }
        func put32(_ v: UInt32, _ offset: Int) { withUnsafeBytes(of: v.littleEndian) { b.replace(offset, $0) } }
        switch content {
        case .stackAndPC(let sp, let pc):
            // The old layout has no CONTROL flag: sp and pc are integer registers. The others
            // stay zero.
            put64(arm64OldInteger, 0)
            put64(sp, 8 + 8 * 31)
            put64(pc, 8 + 8 * 32)
        case .full(let registers, let fpState):
            var flags = arm64OldInteger
            for i in 0..<min(33, registers.count) { put64(registers[i], 8 + 8 * i) }
            if registers.count > 33 { put32(UInt32(truncatingIfNeeded: registers[33]), 272) }
            if fpState.count == 520 {
                flags |= arm64OldFloatingPoint
                b.replace(276, fpState)
            }
            put64(flags, 0)
        }
        return b
    }
}

extension [UInt8] {
    /// Overwrites count(source) bytes from offset; the caller keeps offset + count in bounds.
    fileprivate mutating func replace<C: Collection<UInt8>>(_ offset: Int, _ source: C) {
        replaceSubrange(offset..<offset + source.count, with: source)
    }

    /// A little-endian u32 at offset (0 past the end).
    fileprivate func u32(at offset: Int) -> UInt32 {
        guard offset >= 0, offset + 4 <= count else { return 0 }
        return (0..<4).reduce(UInt32(0)) { $0 | UInt32(self[offset + $1]) << (8 * UInt32($1)) }
    }
}
