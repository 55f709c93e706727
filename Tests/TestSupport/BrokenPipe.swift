import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A test process must never die of a child that closed its end of a pipe. Writing to such a
/// pipe (a child's stdin, a socket to a collector that has gone) raises SIGPIPE, whose default
/// action ends the whole test run without a result line; with SIGPIPE ignored the write fails
/// with EPIPE instead, and the test that made it fails, saying so. Every helper here that starts
/// a child, and every test that starts one with Process itself, calls ``ignoreSIGPIPE()`` first.
///
/// Children started with Foundation's Process inherit the ignored disposition (Process resets
/// none); HarnessSupport's ChildProcess and Swift Testing's exit tests reset SIGPIPE to its
/// default, so the crash children and the "no SIGPIPE" exit tests run as an app would.
package enum BrokenPipe {
    private static let ignored: Void = { _ = signal(SIGPIPE, SIG_IGN) }()

    /// Ignores SIGPIPE in this process (once; idempotent, safe from any thread).
    package static func ignoreSIGPIPE() { ignored }
}
