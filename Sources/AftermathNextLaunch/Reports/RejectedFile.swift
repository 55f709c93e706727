/// A file that was not reported, and why. Bad files are moved to rejected/ with a
/// `.reason` file beside them; they never stop the other reports.
package struct RejectedFile: Sendable, Hashable {
    /// Where the file was found.
    package var path: String
    /// Why it was rejected.
    package var reason: String
    /// Where it was moved, when it was moved aside.
    package var movedTo: String?
}
