import CSignalShim

/// Names of the AFT_ARCH_* values.
enum Architecture {
    static func name(_ value: UInt32) -> String {
        switch value {
        case UInt32(AFT_ARCH_X86_64): return "x86_64"
        case UInt32(AFT_ARCH_ARM64): return "arm64"
        default: return "unknown"
        }
    }

    /// The architecture this code was built for, as an AFT_ARCH_* value.
    static var current: UInt32 {
        #if arch(x86_64)
        return UInt32(AFT_ARCH_X86_64)
        #elseif arch(arm64)
        return UInt32(AFT_ARCH_ARM64)
        #else
        return UInt32(AFT_ARCH_UNKNOWN)
        #endif
    }
}
