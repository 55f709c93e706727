import AftermathNextLaunch
import AftermathOTLP
import AftermathSymbolication
import Foundation
import HarnessSupport

/// Judges one row's record and `aftermath show` view.
struct AsyncChecks {
    var row: AsyncRow
    var record: LogRecord
    var view: [String: Any]?

    static let symbolicator = Symbolicator()
    static let executable = ChildProcess.ownExecutable

    /// One line of a stacktrace attribute, symbolicated when it lies in this executable.
    struct Line {
        var text: String
        var mangled: String?
        var demangled: String?
    }

    func all() -> [TableCheck<AsyncColumn>] { [machine(), chain(), show(), anchor()] }

    var anchorName: String? { record[attribute: "apsio.async_stacktrace.anchor"]?.stringValue }

    /// The lines of a stacktrace attribute; resume addresses are looked up as they are.
    static func lines(_ text: String?, resumes: Bool) -> [Line] {
        let name = (executable as NSString).lastPathComponent
        return (text ?? "").split(separator: "\n").map { line in
            var out = Line(text: String(line))
            let parts = line.split(separator: " ")
            guard parts.count == 5, parts[1] == name, let index = Int(parts[0]),
                let address = UInt64(parts[2].dropFirst(2), radix: 16),
                let offset = UInt64(parts[4].dropFirst(2), radix: 16), address >= offset,
                let s = symbolicator.symbolicate(
                    address: address, imagePath: executable, loadAddress: address - offset,
                    isReturnAddress: !resumes && index > 0)
            else { return out }
            out.mangled = s.function
            out.demangled = s.demangled
            return out
        }
    }

    var machineLines: [Line] { Self.lines(record[attribute: "exception.stacktrace"]?.stringValue, resumes: false) }

    /// The async callers as a tool shows them: without the links a task-anchored chain lists
    /// ahead of the innermost async machine frame.
    var asyncLines: [Line] {
        let all = Self.lines(record[attribute: "apsio.async_stacktrace"]?.stringValue, resumes: true)
        let stale = SwiftAsyncFunction.staleLinks(
            machine: machineLines.map { l in l.mangled.map { ($0, l.demangled ?? $0) } },
            chain: all.map(\.mangled), anchor: anchorName)
        return Array(all.dropFirst(stale))
    }

    func machine() -> TableCheck<AsyncColumn> {
        let names = machineLines.compactMap(\.demangled)
        if names.contains(where: { $0.contains(row.levels.l3) }) { return .pass(.machine, "L3") }
        if row.name == "hang-pool" { return .skip(.machine, "-") }  // a worker's stack, by frame pointers
        return .fail(.machine, "no L3", "exception.stacktrace lacks \(row.levels.l3): \(names.prefix(6))")
    }

    /// Level 2, then level 1, then the task's entry (the closure the Task was made with), in
    /// order; level 2 first (no caller left out, none that returned).
    func chain() -> TableCheck<AsyncColumn> {
        let names = asyncLines.map { $0.demangled ?? $0.text }
        let l2 = names.firstIndex { $0.contains(row.levels.l2) }
        let l1 = names.firstIndex { $0.contains(row.levels.l1) }
        let entry = l1.flatMap { i in names[(i + 1)...].firstIndex { $0.contains("closure") } }
        guard let l2, let l1, let entry, l2 < l1, l1 < entry else {
            return .fail(.chain, "\(names.count) links", "apsio.async_stacktrace: \(names.prefix(8))")
        }
        guard l2 == 0 else { return .fail(.chain, "L2 at \(l2)", "links before level 2: \(names.prefix(l2))") }
        return .pass(.chain, "\(names.count) links")
    }

    /// `aftermath show --json`: the async callers marked async, level 2 with its file and line.
    func show() -> TableCheck<AsyncColumn> {
        guard let view else { return .fail(.show, "none", "aftermath show gave no JSON") }
        let frames = (view["asyncFrames"] as? [[String: Any]]) ?? []
        guard let l2 = frames.first(where: { ($0["function"] as? String)?.contains(row.levels.l2) == true }) else {
            return .fail(.show, "no L2", "show's async frames: \(frames.compactMap { $0["function"] as? String })")
        }
        guard l2["async"] as? Bool == true, let file = l2["file"] as? String, let line = l2["line"] as? Int else {
            return .fail(.show, "no place", "level 2 without async mark or file:line: \(l2)")
        }
        return .pass(.show, "\((file as NSString).lastPathComponent):\(line)")
    }

    func anchor() -> TableCheck<AsyncColumn> {
        guard let anchorName else { return .fail(.anchor, "none", "no apsio.async_stacktrace.anchor") }
        return .pass(.anchor, anchorName)
    }
}
