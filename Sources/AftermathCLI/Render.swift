import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Text output in the style crash reports usually have. Colour only on a terminal, and never
/// when NO_COLOR is set (https://no-color.org).
struct Render {
    var colour: Bool

    static func colourWanted(fd: Int32 = STDOUT_FILENO) -> Bool {
        let noColour = ProcessInfo.processInfo.environment["NO_COLOR"].map { !$0.isEmpty } ?? false
        return !noColour && isatty(fd) == 1
    }

    private func paint(_ code: String, _ s: String) -> String { colour ? "\u{1B}[\(code)m\(s)\u{1B}[0m" : s }
    func bold(_ s: String) -> String { paint("1", s) }
    func red(_ s: String) -> String { paint("1;31", s) }
    func green(_ s: String) -> String { paint("32", s) }
    func yellow(_ s: String) -> String { paint("33", s) }
    func dim(_ s: String) -> String { paint("2", s) }
    func cyan(_ s: String) -> String { paint("36", s) }

    static let titles = ["crash": "Crash", "hang": "Hang", "abnormal_exit": "Abnormal exit", "error": "Handled error"]

    func show(_ v: ReportView) -> String {
        var out: [String] = []
        let duration = v.details.first { $0.key == "duration (ms)" }.map { d in
            "\(d.value) ms"
                + (v.details.contains { $0.key == "unfinished" && $0.value == "true" } ? ", unfinished" : "")
        }
        let what = v.signal ?? duration ?? v.details.first { $0.key == "type" || $0.key == "exit reason" }?.value
        out.append(bold((Self.titles[v.kind] ?? v.kind) + (what.map { ": \($0)" } ?? "")))
        func field(_ name: String, _ value: String?) {
            if let value {
                out.append((name + ":").padding(toLength: max(14, name.count + 2), withPad: " ", startingAt: 0) + value)
            }
        }
        field("App", [v.app, v.release.map { "release \($0)" }].compactMap { $0 }.joined(separator: ", ").nilIfEmpty)
        field("Build id", v.build)
        field("Session", v.session)
        field("Time", v.time)
        field("OS", v.os)
        field("Machine", v.machine)
        field(
            "Report", v.id + (v.file.flatMap { ($0 as NSString).lastPathComponent == v.id ? nil : "  (\($0))" } ?? ""))
        if let signal = v.signal { field("Signal", red(signal)) }
        if let explanation = v.explanation {
            field("Explanation", v.swiftRuntimeFailure != nil ? red(explanation) : explanation)
        }
        if v.swiftRuntimeFailure != nil, let recorded = v.recordedExplanation { field("Recorded", dim(recorded)) }
        for d in v.details where !(v.signal == nil && (d.key == "type" || d.key == "exit reason") && d.value == what) {
            field(d.key.prefix(1).uppercased() + d.key.dropFirst(), d.value)
        }

        if let t = v.thread {
            var header =
                "\n"
                + bold(
                    t.role.prefix(1).uppercased() + t.role.dropFirst() + " thread"
                        + (t.id.map { " \($0)" } ?? "") + (t.name.map { " \"\($0)\"" } ?? "")
                        + (t.main == true ? " (main)" : ""))
            var how: [String] = []
            if let u = t.unwinder { how.append(v.kind == "hang" ? "captured by \(u)" : "unwound with \(u)") }
            if t.truncated == true { how.append("truncated") }
            if !how.isEmpty { header += " (" + how.joined(separator: ", ") + ")" }
            out.append(header + ":")
        }
        if let crashed = v.threads?.first(where: \.crashed) {
            out.append("  " + dim("state \(crashed.state), " + ReportView.contextDescription(crashed)))
        }
        if v.frames.isEmpty && v.kind != "abnormal_exit" { out.append("  (no frames)") }
        out += frameLines(v.frames)
        if !v.asyncFrames.isEmpty {
            out.append("  " + dim("async callers, innermost first:"))
            out += frameLines(v.asyncFrames)
        }
        if (v.frames + v.asyncFrames).contains(where: \.inApp) { out.append(dim("    * in app")) }

        if !v.registers.isEmpty {
            out.append("\n" + bold("Registers:"))
            var row: [String] = []
            for r in v.registers {
                row.append(r.name.leftPad(7) + " " + r.value)
                if row.count == 4 {
                    out.append(row.joined(separator: "  "))
                    row = []
                }
            }
            if !row.isEmpty { out.append(row.joined(separator: "  ")) }
        }

        for t in v.threads ?? [] where !t.crashed {
            var how = ["state \(t.state)", ReportView.contextDescription(t)]
            if !t.frames.isEmpty { how.append("unwound with \(t.unwinder)") }
            if t.truncated { how.append("truncated") }
            if let signal = t.alsoCrashedSignal { how.append("also crashed: signal \(signal)") }
            out.append(
                "\n"
                    + bold(
                        "Thread \(t.id) \"\(t.name)\"" + (t.main ? " (main)" : "") + (t.aftermath ? " (Aftermath)" : "")
                    )
                    + " (" + how.joined(separator: ", ") + "):")
            if t.frames.isEmpty { out.append("  (no frames)") }
            out += frameLines(t.frames)
            if !t.asyncFrames.isEmpty {
                out.append("  " + dim("async callers, innermost first:"))
                out += frameLines(t.asyncFrames)
            }
        }

        if !v.images.isEmpty {
            out.append("\n" + bold("Images:"))
            for i in v.images {
                let tags = [i.main ? "main" : nil, i.inApp ? "app" : nil].compactMap { $0 }
                let range = i.loadAddress + (i.end.map { "-\($0)" } ?? "")
                out.append(
                    "  \(range)  \(i.inApp ? green(i.name) : i.name)  \(i.buildID.isEmpty ? "(no build id)" : i.buildID)"
                        + (tags.isEmpty ? "" : "  [\(tags.joined(separator: ", "))]") + (i.path.map { "  \($0)" } ?? "")
                )
                if i.debugInfoFound, let file = i.debugFile {
                    out.append("      debug info: " + green("found") + " (\(i.debugSource ?? "?"): \(file))")
                } else {
                    out.append(
                        "      debug info: " + yellow("not found") + (i.binary.map { "; symbols from \($0)" } ?? ""))
                }
                for p in i.problems where !p.hasPrefix("no DWARF for") || i.debugInfoFound {
                    out.append("      " + yellow("note: ") + p)
                }
                if !i.debugInfoFound, let missing = i.problems.first(where: { $0.hasPrefix("no DWARF for") }) {
                    out.append("      " + yellow("note: ") + missing)
                }
            }
        }
        return out.joined(separator: "\n")
    }

    /// A stack's lines: index, in-app mark, image, address, then the function and its place
    /// (inlined functions first, each on its own line).
    func frameLines(_ frames: [ReportView.Frame]) -> [String] {
        var out: [String] = []
        let imageWidth = min(24, frames.map { ($0.image ?? "???").count }.max() ?? 3)
        for f in frames {
            let mark = f.inApp ? green("*") : " "
            let index = String(f.index).leftPad(3)
            let image = (f.image ?? "???").padding(toLength: imageWidth, withPad: " ", startingAt: 0)
            let prefix = "\(index) \(mark) \(image)  \(f.address)  "
            let indent = String(repeating: " ", count: 3 + 3 + imageWidth + 2 + f.address.count + 2)
            var lines: [String] = []
            for inl in f.inlined {
                lines.append(
                    dim("[inlined] ")
                        + (inl.function.hasPrefix("Swift runtime failure:") ? red(inl.function) : inl.function)
                        + place(inl.file, inl.line, inl.column))
            }
            if let function = f.function {
                let name = (f.async == true ? cyan("[async] ") : "") + (f.inApp ? bold(function) : function)
                lines.append(name + " + \(f.offset ?? 0)" + place(f.file, f.line, f.column))
            } else {
                lines.append(
                    (f.async == true ? cyan("[async] ") : "") + dim((f.image ?? "???") + " + " + (f.imageOffset ?? "?"))
                )
            }
            out.append(prefix + lines[0])
            for line in lines.dropFirst() { out.append(indent + line) }
        }
        return out
    }

    private func place(_ file: String?, _ line: Int?, _ column: Int?) -> String {
        guard let file, let line else { return "" }
        return dim(" at ") + cyan("\(file):\(line)" + (column.map { ":\($0)" } ?? ""))
    }
}

extension String {
    func leftPad(_ width: Int) -> String { count >= width ? self : String(repeating: " ", count: width - count) + self }
}
