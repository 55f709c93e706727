/// A reports directory that cannot be used.
package enum ReportDirectoryError: Error, Sendable, Hashable {
    /// The directory could not be created, or is not a writable directory.
    case cannotCreate(path: String, reason: String)
}
