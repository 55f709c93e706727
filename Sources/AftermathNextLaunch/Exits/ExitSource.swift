/// Where an exit's reason comes from: apsio.exit.source.
package enum ExitSource: String, Sendable, Hashable {
    /// Read from the system: cgroup OOM counters, the siginfo of a termination signal.
    case platform
    /// Inferred from what the run left behind.
    case inferred
}
