import CSignalShim

/// Names of the AFT_UNWINDER_* values.
enum Unwinder {
    static func name(_ v: UInt32) -> String {
        switch v {
        case UInt32(AFT_UNWINDER_LIBUNWIND): return "libunwind"
        case UInt32(AFT_UNWINDER_FRAME_POINTER): return "frame_pointer"
        case UInt32(AFT_UNWINDER_PC_ONLY): return "pc_only"
        default: return "none"
        }
    }
}
