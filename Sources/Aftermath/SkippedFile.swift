/// A file that was not reported, and why. Bad files are moved to rejected/ with a
/// `.reason` file beside them; they never stop the other reports.
public struct SkippedFile: Sendable, Hashable {
    /// Where the file was found.
    public var path: String
    /// Why it was skipped.
    public var reason: String
    /// Where it was moved, when it was moved aside.
    public var movedTo: String?
}
