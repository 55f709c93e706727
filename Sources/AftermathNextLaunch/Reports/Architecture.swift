import CSignalShim

/// The CPU architecture a run was built for, as the files record it (AFT_ARCH_*).
package enum Architecture: String, Sendable, Hashable {
    case x86_64
    case arm64
    case unknown

    /// The architecture of an AFT_ARCH_* value.
    package init(code: UInt32) {
        switch code {
        case UInt32(AFT_ARCH_X86_64): self = .x86_64
        case UInt32(AFT_ARCH_ARM64): self = .arm64
        default: self = .unknown
        }
    }

    /// The AFT_ARCH_* value.
    package var code: UInt32 {
        switch self {
        case .x86_64: UInt32(AFT_ARCH_X86_64)
        case .arm64: UInt32(AFT_ARCH_ARM64)
        case .unknown: UInt32(AFT_ARCH_UNKNOWN)
        }
    }

    /// The architecture this code was built for.
    package static var current: Architecture {
        #if arch(x86_64)
        .x86_64
        #elseif arch(arm64)
        .arm64
        #else
        .unknown
        #endif
    }
}
