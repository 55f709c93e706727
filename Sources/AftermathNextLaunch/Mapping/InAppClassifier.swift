/// Decides whether a loaded image belongs to the app (the in_app flag of apsio.crash.images), from
/// the path in `/proc/<pid>/maps`, compared as text by whole path components without
/// touching the file system.
package struct InAppClassifier: Sendable {
    /// The app's install directory, normalized; `nil` when empty or `/`, where only the
    /// main executable is in-app.
    private let rootComponents: [Substring]?

    /// Creates a classifier for an app installed under `appRoot`, such as `/opt/shop`.
    ///
    /// Repeated and trailing slashes, `.` and `..` are normalized as text; symlinks are not resolved.
    package init(appRoot: String) {
        let components = Self.components(appRoot)
        rootComponents = components.isEmpty || components == ["/"] ? nil : components
    }

    /// Whether the image at `path` is in-app: the main executable always is; pseudo-files
    /// (`[vdso]`, `[anon:…]`, `/memfd:…`) and anonymous mappings never are; any other image
    /// is when it lies inside the app root. A trailing ` (deleted)` is ignored.
    package func isInApp(path: String, isMainExecutable: Bool) -> Bool {
        let path = Self.removingDeleted(path)
        if path.isEmpty || Self.isPseudo(path) || path.hasPrefix("/memfd:") { return false }
        if isMainExecutable { return true }
        guard let rootComponents else { return false }
        let components = Self.components(path)
        return components.count > rootComponents.count && components.starts(with: rootComponents)
    }

    /// The image's file name: the last path component after removing a trailing ` (deleted)`;
    /// pseudo-files such as `[vdso]` are returned whole.
    package static func imageName(_ path: String) -> String {
        let path = removingDeleted(path)
        if isPseudo(path) { return path }
        return path.split(separator: "/").last.map(String.init) ?? path
    }

    private static func removingDeleted(_ path: String) -> String {
        path.hasSuffix(" (deleted)") ? String(path.dropLast(" (deleted)".count)) : path
    }

    private static func isPseudo(_ path: String) -> Bool {
        path.hasPrefix("[") && path.hasSuffix("]")
    }

    /// The path's components after lexical normalization, starting with `"/"` when absolute.
    private static func components(_ path: String) -> [Substring] {
        var result: [Substring] = path.hasPrefix("/") ? ["/"] : []
        let base = result.count
        for component in path.split(separator: "/") {
            switch component {
            case ".": continue
            case "..":
                if result.count > base, result.last != ".." {
                    result.removeLast()
                } else if base == 0 {
                    result.append(component)
                }  // relative: keep leading ".."
            default: result.append(component)
            }
        }
        return result
    }
}
