import CSignalShim

/// How the crashed thread's stack was taken (AFT_UNWINDER_*); apsio.crash.unwinder.
package enum Unwinder: String, Sendable, Hashable {
    case libunwind
    case framePointer = "frame_pointer"
    case pcOnly = "pc_only"
    case none
    /// Left by the handler to the next launch, which unwinds it from the stack memory (only
    /// until then: a decoded report says which unwinder did it).
    case deferred

    /// The unwinder of an AFT_UNWINDER_* value.
    package init(code: UInt32) {
        switch code {
        case UInt32(AFT_UNWINDER_LIBUNWIND): self = .libunwind
        case UInt32(AFT_UNWINDER_FRAME_POINTER): self = .framePointer
        case UInt32(AFT_UNWINDER_PC_ONLY): self = .pcOnly
        case UInt32(AFT_UNWINDER_DEFERRED): self = .deferred
        default: self = .none
        }
    }
}

/// How libunwind's attempt at the crashed thread's stack ended (AFT_UNWIND_STATUS_*). The
/// handler walks frame pointers first, without locks, then gives libunwind a deadline in a
/// helper process; when that attempt did not finish, the frame-pointer stack is the record's,
/// and apsio.crash.unwind_fallback says why.
package enum UnwindStatus: String, Sendable, Hashable {
    /// Written before the field existed.
    case notRecorded = "not_recorded"
    /// libunwind finished.
    case complete
    /// libunwind did not finish within its deadline: a lock another thread held, such as the
    /// loader's.
    case timedOut = "timed_out"
    /// libunwind's helper process could not start (refused by a seccomp filter or a process
    /// limit) or died (a fault on a corrupt stack).
    case helperFailed = "helper_failed"
    /// Not tried: an earlier helper was killed at its deadline, and may have left one of
    /// libunwind's locks held, so the process no longer calls libunwind.
    case skipped

    /// The status of an AFT_UNWIND_STATUS_* value.
    package init(code: UInt32) {
        switch code {
        case UInt32(AFT_UNWIND_STATUS_COMPLETE): self = .complete
        case UInt32(AFT_UNWIND_STATUS_TIMED_OUT): self = .timedOut
        case UInt32(AFT_UNWIND_STATUS_HELPER_FAILED): self = .helperFailed
        case UInt32(AFT_UNWIND_STATUS_SKIPPED): self = .skipped
        default: self = .notRecorded
        }
    }

    /// The reason a record gives for a stack that is not libunwind's; nil when there is none.
    package var fallbackReason: String? {
        switch self {
        case .timedOut, .helperFailed, .skipped: rawValue
        case .notRecorded, .complete: nil
        }
    }
}
