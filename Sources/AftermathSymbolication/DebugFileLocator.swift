import CSymbolication
import Foundation

/// An image as a report names it: enough to find its files on this machine.
package struct ImageReference: Sendable, Hashable {
    /// The file name (records carry only this).
    package var name: String
    /// The path it was loaded from on the device, when the report has it.
    package var path: String?
    /// The GNU build id, lowercase hex; empty when the image had none.
    package var buildID: String
    /// `buildID` is the image's text hash (it had no GNU build id): files are matched by the
    /// same hash computed from them, and build-id indexes are not asked.
    package var isTextHash: Bool
    /// Start of its lowest mapping.
    package var loadAddress: UInt64
    /// The app's own code rather than a system library.
    package var isInApp: Bool

    package init(
        name: String, path: String?, buildID: String, loadAddress: UInt64, isInApp: Bool, isTextHash: Bool = false
    ) {
        self.name = name
        self.path = path
        self.buildID = buildID.lowercased()
        self.isTextHash = isTextHash
        self.loadAddress = loadAddress
        self.isInApp = isInApp
    }
}

/// The files found for one image, each checked against the report's build id.
package struct DebugFiles: Sendable, Hashable {
    /// Where the DWARF came from.
    package enum Source: String, Sendable, Hashable {
        case binary = "the binary itself"
        case nextToBinary = "next to the binary"
        case debugLink = ".gnu_debuglink"
        case systemBuildID = "/usr/lib/debug/.build-id"
        case debugDirectory = "--debug-dir"
        case debuginfod = "debuginfod"
    }

    /// The image's own file (program headers and usually a symbol table), when found and matching.
    package var binary: String?
    /// The file with the image's DWARF (the binary itself, or a separate debug file).
    package var debugFile: String?
    /// Where `debugFile` was found.
    package var source: Source?
    /// What was found but not used (another build id, not ELF) and what is missing, one line each.
    package var problems: [String]

    package init(binary: String? = nil, debugFile: String? = nil, source: Source? = nil, problems: [String] = []) {
        self.binary = binary
        self.debugFile = debugFile
        self.source = source
        self.problems = problems
    }

    /// DWARF was found.
    package var hasDWARF: Bool { debugFile != nil }
    /// The file to read program headers and symbols from: the binary, else the debug file.
    package var elfFile: String? { binary ?? debugFile }
    /// The debug file when it is not the binary itself.
    package var separateDebugFile: String? { debugFile == binary ? nil : debugFile }
}

/// Finds an image's binary and DWARF by build id, checking every candidate before use: the
/// binary's path, files next to it, its `.gnu_debuglink`, `/usr/lib/debug/.build-id`, the
/// `--debug-dir` directories, then debuginfod (when `DEBUGINFOD_URLS` is set).
package struct DebugFileLocator: Sendable {
    /// Extra directories, searched in order: `.build-id/xx/rest.debug`, `xx/rest.debug`, the
    /// image's name, name.debug and its debug link name.
    package var debugDirectories: [String]
    /// The system's debug root (Debian's -dbgsym packages install under it).
    package var systemRoot: String
    /// Ask debuginfod servers when nothing local has the DWARF.
    package var debuginfod: Bool

    package init(
        debugDirectories: [String], systemRoot: String = "/usr/lib/debug",
        debuginfod: Bool = DebugFileLocator.debuginfodConfigured
    ) {
        self.debugDirectories = debugDirectories
        self.systemRoot = systemRoot
        self.debuginfod = debuginfod
    }

    /// The directories libraries are loaded from here: those of the libraries this process has
    /// mapped (the Swift runtime's among them), then the system's. A file found there is used
    /// only when its build id is the record's.
    package static let libraryDirectories: [String] = {
        var directories: [String] = []
        // Read to its end: String(contentsOfFile:) stops at /proc's first page.
        let bytes = (try? FileHandle(forReadingFrom: URL(fileURLWithPath: "/proc/self/maps")).readToEnd()) ?? nil
        let maps = String(decoding: bytes ?? Data(), as: UTF8.self)
        for line in maps.split(separator: "\n") {
            guard let slash = line.firstIndex(of: "/") else { continue }
            let path = String(line[slash...])
            guard path.contains(".so") else { continue }
            let directory = (path as NSString).deletingLastPathComponent
            if !directory.isEmpty && !directories.contains(directory) { directories.append(directory) }
        }
        let system = [
            "/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu",
            "/usr/lib/aarch64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib",
        ]
        return directories + system.filter { !directories.contains($0) }
    }()

    /// DEBUGINFOD_URLS names at least one server.
    package static var debuginfodConfigured: Bool {
        !(ProcessInfo.processInfo.environment["DEBUGINFOD_URLS"] ?? "").trimmingCharacters(in: .whitespaces).isEmpty
    }

    package func locate(_ image: ImageReference) -> DebugFiles {
        var found = DebugFiles()
        var checked: [String: Bool] = [:]
        let id = image.buildID
        // What build-id indexes (.build-id directories, debuginfod) are asked for: a text hash is not indexed.
        let indexed = image.isTextHash ? "" : id
        if id.isEmpty { found.problems.append("the report has no build id for \(image.name): files used unverified") }

        /// Whether `path` is an ELF file with the report's build id (mismatches are noted).
        /// Each path is checked (and a problem noted) once.
        func matches(_ path: String) -> Bool {
            if let known = checked[path] { return known }
            let result = check(path)
            checked[path] = result
            return result
        }
        func check(_ path: String) -> Bool {
            guard FileManager.default.fileExists(atPath: path) else { return false }
            let kind = image.isTextHash ? "text hash" : "build id"
            guard let actual = image.isTextHash ? Self.textHash(of: path) : Self.buildID(of: path) else {
                found.problems.append(
                    "\(path): not a readable ELF file\(image.isTextHash ? " with code" : ""), not used")
                return false
            }
            guard id.isEmpty || actual == id else {
                found.problems.append(
                    "\(path) has \(kind) \(actual.isEmpty ? "(none)" : actual), the report \(id): not used")
                return false
            }
            return true
        }
        func useDWARF(_ path: String, _ source: DebugFiles.Source) -> Bool {
            guard matches(path) else { return false }
            guard aftsym_elf_has_dwarf(path) != 0 else { return false }
            found.debugFile = path
            found.source = source
            return true
        }

        // The binary: where it was loaded from, else a copy by build id or name.
        var binaryCandidates: [String] = []
        if let path = image.path { binaryCandidates.append(path) }
        if indexed.count > 2 {
            binaryCandidates.append("\(systemRoot)/.build-id/\(indexed.prefix(2))/\(indexed.dropFirst(2))")
        }
        binaryCandidates += debugDirectories.map { "\($0)/\(image.name)" }
        // A record names its images without their paths: on the machine that ran the app (or
        // one with the same toolchain), the loader's directories hold its libraries.
        if image.path == nil && !image.name.isEmpty && !image.name.contains("/") {
            binaryCandidates += Self.libraryDirectories.map { "\($0)/\(image.name)" }
        }
        for candidate in binaryCandidates where matches(candidate) {
            found.binary = candidate
            break
        }
        if let binary = found.binary, useDWARF(binary, .binary) { return found }

        var candidates: [(String, DebugFiles.Source)] = []
        let link = found.binary.flatMap(Self.debugLink(of:))
        if let binary = found.binary ?? image.path {
            let dir = (binary as NSString).deletingLastPathComponent
            let name = (binary as NSString).lastPathComponent
            candidates += [("\(binary).debug", .nextToBinary), ("\(dir)/.debug/\(name).debug", .nextToBinary)]
            if let link {
                candidates += [
                    ("\(dir)/\(link)", .debugLink), ("\(dir)/.debug/\(link)", .debugLink),
                    ("\(systemRoot)\(dir)/\(link)", .debugLink),
                ]
            }
        }
        if indexed.count > 2 {
            candidates.append(
                ("\(systemRoot)/.build-id/\(indexed.prefix(2))/\(indexed.dropFirst(2)).debug", .systemBuildID))
        }
        for dir in debugDirectories {
            if indexed.count > 2 {
                candidates += [
                    ("\(dir)/.build-id/\(indexed.prefix(2))/\(indexed.dropFirst(2)).debug", .debugDirectory),
                    ("\(dir)/\(indexed.prefix(2))/\(indexed.dropFirst(2)).debug", .debugDirectory),
                ]
            }
            candidates += [("\(dir)/\(image.name).debug", .debugDirectory), ("\(dir)/\(image.name)", .debugDirectory)]
            if let link { candidates.append(("\(dir)/\(link)", .debugDirectory)) }
        }
        for (path, source) in candidates where useDWARF(path, source) { return found }

        if debuginfod && indexed.count > 2 {
            switch Self.debuginfodFind(buildID: id) {
            case .success(let path):
                if useDWARF(path, .debuginfod) { return found }
                found.problems.append("debuginfod gave \(path) without DWARF for \(id)")
            case .failure(let reason):
                found.problems.append("debuginfod has no debug file for \(id): \(reason)")
            }
        }
        if found.binary == nil && image.path == nil && candidates.isEmpty {
            found.problems.append("no binary or debug file for \(image.name)")
        } else if found.binary == nil {
            found.problems.append("no binary with build id \(id.isEmpty ? "(none)" : id) for \(image.name)")
        }
        found.problems.append(
            "no DWARF for \(image.name)"
                + (debugDirectories.isEmpty && !debuginfod
                    ? " (looked next to the binary and in \(systemRoot); try --debug-dir or DEBUGINFOD_URLS)" : ""))
        return found
    }

    /// The build id of the ELF file at `path` (lowercase hex, "" when it has none), or nil
    /// when it cannot be read as ELF.
    package static func buildID(of path: String) -> String? {
        var bytes = [UInt8](repeating: 0, count: 64)
        let n = aftsym_elf_build_id(path, &bytes, bytes.count)
        guard n >= 0 else { return nil }
        return bytes.prefix(Int(n)).map { String(format: "%02x", $0) }.joined()
    }

    /// The text hash of the ELF file at `path` (lowercase hex), as Aftermath records it for an
    /// image without a GNU build id; nil when it cannot be computed.
    package static func textHash(of path: String) -> String? {
        var bytes = [UInt8](repeating: 0, count: 16)
        guard aftsym_elf_text_hash(path, &bytes) != 0 else { return nil }
        return bytes.map { String(format: "%02x", $0) }.joined()
    }

    /// The file name in `path`'s .gnu_debuglink section.
    package static func debugLink(of path: String) -> String? {
        var buffer = [CChar](repeating: 0, count: 4096)
        guard aftsym_elf_debuglink(path, &buffer, buffer.count) != 0 else { return nil }
        return String(cBuffer: buffer)
    }

    struct DebuginfodFailure: Error { var reason: String }

    /// libdebuginfod: the servers in DEBUGINFOD_URLS, cached under DEBUGINFOD_CACHE_PATH.
    static func debuginfodFind(buildID: String) -> Result<String, DebuginfodFailure> {
        var id: [UInt8] = []
        var chars = Array(buildID.utf8)[...]
        while chars.count >= 2, let byte = UInt8(String(decoding: chars.prefix(2), as: UTF8.self), radix: 16) {
            id.append(byte)
            chars = chars.dropFirst(2)
        }
        var path = [CChar](repeating: 0, count: 4096)
        var error = [CChar](repeating: 0, count: 512)
        guard aftsym_debuginfod_find(id, id.count, &path, path.count, &error, error.count) != 0 else {
            return .failure(DebuginfodFailure(reason: String(cBuffer: error)))
        }
        return .success(String(cBuffer: path))
    }
}
