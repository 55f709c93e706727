extension Aftermath {
    /// Why ``Aftermath/start(_:)`` could not start crash reporting. The app keeps running.
    public enum StartError: Error, Sendable, Hashable, CustomStringConvertible {
        /// The reports directory could not be created, or is not a writable directory.
        case reportsDirectoryUnusable(path: String, reason: String)
        /// The crash handlers could not be installed.
        case crashHandlersNotInstalled(String)
        /// The hang watchdog could not start (crash capture is on).
        case hangWatchdogNotStarted(String)

        public var description: String {
            switch self {
            case .reportsDirectoryUnusable(let path, let reason): "cannot use the reports directory \(path): \(reason)"
            case .crashHandlersNotInstalled(let why): "cannot install the crash handlers: \(why)"
            case .hangWatchdogNotStarted(let why): "cannot start the hang watchdog: \(why)"
            }
        }
    }
}
