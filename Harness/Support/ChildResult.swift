import AftermathNextLaunch
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// How a child process ended, from waitpid's status.
package enum Termination: Equatable, Sendable, CustomStringConvertible {
    case exited(Int32)
    case signaled(Int32)
    case timedOut
    case failedToStart(String)

    package init(waitStatus status: Int32) {
        let low = status & 0x7F
        if low == 0 {
            self = .exited((status >> 8) & 0xFF)  // WIFEXITED / WEXITSTATUS
        } else {
            self = .signaled(low)  // WIFSIGNALED / WTERMSIG
        }
    }

    package var signal: Int32? {
        if case .signaled(let signal) = self { signal } else { nil }
    }

    package var description: String {
        switch self {
        case .exited(let code): "exit \(code)"
        case .signaled(let signal): SignalDescription.name(signal)
        case .timedOut: "timed out"
        case .failedToStart(let why): "not started (\(why))"
        }
    }
}

/// What a finished child left: its termination and output.
package struct ChildResult: Sendable {
    package var arguments: [String]
    package var termination: Termination
    package var standardOutput: String
    /// standardOutput, split at newlines (a last line without one included).
    package var lines: [String]
    package var standardError: String
    /// What the child wrote on its values descriptor, as little-endian UInt64s.
    package var values: [UInt64]
    package var milliseconds: Int
    /// CLOCK_MONOTONIC nanoseconds when waitpid returned the child's status.
    package var exitedAt: UInt64?
    /// When a ``StderrWatch`` was given: what its check returned the moment one of its markers
    /// first appeared on stderr; nil when no marker appeared.
    package var watchResult: Bool?
}

/// Looks at the world the moment a marker appears on a child's stderr.
package struct StderrWatch {
    package var markers: [String]
    package var check: () -> Bool

    package init(markers: [String], check: @escaping () -> Bool) {
        self.markers = markers
        self.check = check
    }
}

/// CLOCK_MONOTONIC readings.
package enum Monotonic {
    package static func nanoseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
    }

    package static func seconds() -> Double {
        Double(nanoseconds()) / 1e9
    }
}
