import CSignalShim

/// The machine a crash happened on, as start read it: processors and when the process began.
/// What a minidump's SystemInfo and MiscInfo streams hold beyond the run's context.
package struct MachineInfo: Sendable, Hashable {
    /// Processors the process could run on (its affinity mask).
    package var cpuCount: UInt32
    /// x86-64: cpuid leaf 1 eax (family, model, stepping); arm64: MIDR_EL1; 0 unknown.
    package var cpuSignature: UInt32
    /// x86-64: cpuid leaf 1 edx.
    package var cpuFeatures: UInt32
    /// x86-64: the vendor cpuid names ("GenuineIntel", "AuthenticAMD"); empty elsewhere.
    package var cpuVendor: String
    /// The kernel's AT_HWCAP.
    package var hardwareCapabilities: UInt64
    /// When the process began, nanoseconds since the Unix epoch; nil unknown.
    package var processStartUnixNano: UInt64?

    package init(
        cpuCount: UInt32, cpuSignature: UInt32 = 0, cpuFeatures: UInt32 = 0,
        cpuVendor: String = "", hardwareCapabilities: UInt64 = 0, processStartUnixNano: UInt64? = nil
    ) {
        self.cpuCount = cpuCount
        self.cpuSignature = cpuSignature
        self.cpuFeatures = cpuFeatures
        self.cpuVendor = cpuVendor
        self.hardwareCapabilities = hardwareCapabilities
        self.processStartUnixNano = processStartUnixNano
    }

    package init(_ s: aft_system_info) {
        var s = s
        self.init(
            cpuCount: s.cpu_count, cpuSignature: s.cpu_signature, cpuFeatures: s.cpu_features,
            cpuVendor: CString.read(&s.cpu_vendor),
            hardwareCapabilities: s.hwcaps,
            processStartUnixNano: s.process_start_realtime_ns != 0 ? s.process_start_realtime_ns : nil)
    }

    /// x86-64 family, model and stepping from the cpuid signature, the extended family and
    /// model folded in as the Linux kernel does (so they read as /proc/cpuinfo's); nil for a
    /// signature of 0.
    package var x86Identity: (family: UInt32, model: UInt32, stepping: UInt32)? {
        guard cpuSignature != 0 else { return nil }
        let base = (cpuSignature >> 8) & 0xF
        let family = base == 0xF ? base + ((cpuSignature >> 20) & 0xFF) : base
        var model = (cpuSignature >> 4) & 0xF
        if family >= 0x6 { model |= ((cpuSignature >> 16) & 0xF) << 4 }
        return (family, model, cpuSignature & 0xF)
    }
}
