import CSignalShim

/// How the watchdog took the hung thread's stack (AFT_CAPTURE_*); apsio.hang.capture.
package enum HangCaptureMethod: String, Sendable, Hashable {
    /// A signal handler on the blocked thread walked its stack.
    case signal
    /// The stack came from /proc (the thread could not take the signal).
    case proc
    /// No stack was taken.
    case none

    /// The method of an AFT_CAPTURE_* value.
    package init(code: UInt32) {
        switch code {
        case UInt32(AFT_CAPTURE_SIGNAL): self = .signal
        case UInt32(AFT_CAPTURE_PROC): self = .proc
        default: self = .none
        }
    }
}
