import CSignalShim

/// How the handler took the crashed thread's stack (AFT_UNWINDER_*); apsio.crash.unwinder.
package enum Unwinder: String, Sendable, Hashable {
    case libunwind
    case framePointer = "frame_pointer"
    case pcOnly = "pc_only"
    case none

    /// The unwinder of an AFT_UNWINDER_* value.
    package init(code: UInt32) {
        switch code {
        case UInt32(AFT_UNWINDER_LIBUNWIND): self = .libunwind
        case UInt32(AFT_UNWINDER_FRAME_POINTER): self = .framePointer
        case UInt32(AFT_UNWINDER_PC_ONLY): self = .pcOnly
        default: self = .none
        }
    }
}
