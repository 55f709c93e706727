/// A reports directory that cannot be used.
public enum ReportStoreError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The directory could not be created or is not writable.
    case cannotCreate(path: String, reason: String)
    /// The crash handler could not be installed.
    case installFailed(String)

    public var description: String {
        switch self {
        case .cannotCreate(let path, let reason): return "cannot use \(path): \(reason)"
        case .installFailed(let why): return "cannot install the crash handler: \(why)"
        }
    }
}
