/// What the next launch decides about a run that ended.
package enum ExitVerdict: Sendable, Hashable {
    /// Nothing to report, and why (clean exit, crash report, update, reboot, debugger, ...).
    case nothing(String)
    /// An abnormal exit to report.
    case abnormal(ExitReport)

    /// The report, when there is one.
    package var report: ExitReport? {
        if case .abnormal(let r) = self { r } else { nil }
    }
}
