import AftermathNextLaunch
import AftermathOTLP
import AftermathSymbolication
import Foundation

/// The commands. Each returns the exit status: 0 found, 1 nothing found, 2 usage error.
struct Commands {
    let arguments: Arguments
    let json: Bool
    let render: Render

    init(_ arguments: Arguments) {
        self.arguments = arguments
        json = arguments.flags.contains("--json")
        render = Render(colour: Render.colourWanted())
    }

    struct Failure: Error {
        var message: String
        var status: Int32
    }

    func fail(_ message: String, status: Int32 = 1) -> Failure { Failure(message: message, status: status) }

    func run() throws(Failure) -> Int32 {
        switch arguments.command {
        case .list: return try list()
        case .show: return try show()
        case .dump: return try dump()
        case .symbolicate: return try symbolicate()
        case .minidump: return try minidump()
        }
    }

    // MARK: Reports directories

    /// The reports directories to read. A directory named with --dir or --service must exist.
    func directories() throws(Failure) -> [ReportDirectory] {
        if let dir = arguments.value("--dir") {
            try requireDirectory(dir, what: "reports directory")
            return [ReportDirectory(root: dir)]
        }
        if let service = arguments.value("--service") {
            let root = ReportDirectory.defaultRoot(serviceName: service)
            try requireDirectory(root, what: "reports directory of service \(service)")
            return [ReportDirectory(root: root)]
        }
        let base = (ReportDirectory.defaultRoot(serviceName: "x") as NSString).deletingLastPathComponent
        let names = (try? FileManager.default.contentsOfDirectory(atPath: base)) ?? []
        return names.sorted().map { ReportDirectory(root: (base as NSString).appendingPathComponent($0)) }
    }

    func requireDirectory(_ path: String, what: String) throws(Failure) {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw fail("no such \(what): \(path)", status: 2)
        }
    }

    func collect() throws(Failure) -> (
        reports: [(PendingReport, ReportDirectory)], rejected: [RejectedFile], directories: [ReportDirectory]
    ) {
        let dirs = try directories()
        var reports: [(PendingReport, ReportDirectory)] = []
        var rejected: [RejectedFile] = []
        for dir in dirs {
            let c = ReportCollector(directory: dir).collect(moveRejected: false)
            reports += c.reports.map { ($0, dir) }
            rejected += c.rejected
        }
        return (reports, rejected, dirs)
    }

    func symbolicator() throws(Failure) -> DWARFSymbolicator? {
        if arguments.flags.contains("--no-symbols") { return nil }
        let dirs = arguments.all("--debug-dir")
        for dir in dirs { try requireDirectory(dir, what: "debug directory") }
        return DWARFSymbolicator(locator: DebugFileLocator(debugDirectories: dirs))
    }

    static func id(_ r: PendingReport) -> String {
        r.record[attribute: "app.crash.id"]?.stringValue
            ?? r.record[attribute: "log.record.uid"]?.stringValue
            ?? (r.path as NSString).lastPathComponent
    }

    static func summary(_ record: LogRecord) -> String {
        if let type = record[attribute: "exception.type"]?.stringValue { return type }
        if let reason = record[attribute: "apsio.exit.reason"]?.stringValue { return "exit: \(reason)" }
        if let ms = record[attribute: "apsio.hang.duration"]?.intValue {
            return "hang \(ms) ms"
                + (record[attribute: "apsio.hang.unfinished"]?.boolValue == true ? " (unfinished)" : "")
        }
        return record.eventName ?? ""
    }

    // MARK: list

    struct ListEntry: Encodable {
        var kind: String
        var time: String
        var what: String
        var release: String?
        var id: String
        var file: String
    }

    struct Listing: Encodable {
        var directories: [String]
        var reports: [ListEntry]
        var rejected: [[String: String]]
        /// Files already in rejected/, with the reason recorded beside each.
        var inRejected: [[String: String]]
    }

    func list() throws(Failure) -> Int32 {
        let (reports, rejected, dirs) = try collect()
        let setAside = dirs.flatMap { ReportCollector(directory: $0).rejectedFiles() }
        let entries = reports.map { r, _ in
            ListEntry(
                kind: r.kind.rawValue, time: ReportView.isoTime(r.record.timeUnixNano), what: Self.summary(r.record),
                release: r.record[attribute: "service.version"]?.stringValue, id: Self.id(r), file: r.path)
        }
        if json {
            printJSON(
                Listing(
                    directories: dirs.map(\.root), reports: entries,
                    rejected: rejected.map { ["path": $0.path, "reason": $0.reason] },
                    inRejected: setAside.map { ["path": $0.path, "reason": $0.reason] }))
        } else {
            if dirs.isEmpty { print("no reports directory found") }
            if entries.isEmpty && !dirs.isEmpty {
                print("no pending reports in \(dirs.map(\.root).joined(separator: ", "))")
            }
            if !entries.isEmpty {
                printTable(
                    ["kind", "time (UTC)", "what", "release", "id"],
                    entries.map { [$0.kind, $0.time, $0.what, $0.release ?? "", $0.id] })
            }
            for s in rejected { print("rejected \(s.path): \(s.reason)") }
            for s in setAside { print("in rejected/: \(s.path): \(s.reason)") }
        }
        return entries.isEmpty ? 1 : 0
    }

    // MARK: show

    func find(_ query: String, command: String) throws(Failure) -> Report {
        let (reports, _, _) = try collect()
        let q = query.lowercased()
        let matches = reports.filter { r, _ in
            let id = Self.id(r).lowercased()
            // The id as records print it, as file names hold it (no dashes), or the file's name:
            // a reserve committed in place keeps the name it had before the next launch.
            return id.hasPrefix(q) || id.replacingOccurrences(of: "-", with: "").hasPrefix(q)
                || (r.path as NSString).lastPathComponent.lowercased().hasPrefix(q)
        }
        guard matches.count == 1, let (r, _) = matches.first else {
            throw fail(
                matches.isEmpty
                    ? "no report matches \(query) (see aftermath list)"
                    : "\(matches.count) reports match \(query): "
                        + matches.map { Self.id($0.0) }.joined(separator: ", "))
        }
        return Report(pending: r, serviceName: nil)
    }

    func show() throws(Failure) -> Int32 {
        let report = try find(arguments.operands[0], command: "show")
        let view = ReportView(
            report, symbolicator: try symbolicator(), crashedThreadOnly: arguments.value("--threads") == "crashed")
        if json { printJSON(view) } else { print(render.show(view)) }
        return 0
    }

    // MARK: dump

    func dump() throws(Failure) -> Int32 {
        let (reports, _, _) = try collect()
        let resource = SDK.resource(serviceName: "aftermath-cli", serviceVersion: SDK.version)
        let batch = LogBatch(
            resource: resource, scopeName: SDK.scopeName, scopeVersion: SDK.version,
            records: reports.map(\.0.record))
        print(OTLPJSON.encodeString(batch, pretty: true))
        return reports.isEmpty ? 1 : 0
    }

    // MARK: symbolicate

    func symbolicate() throws(Failure) -> Int32 {
        let input = arguments.operands[0]
        let symbolicator = try symbolicator()
        var reports: [Report] = []
        if input == "-" {
            reports = try otlpReports(FileHandle.standardInput.readDataToEndOfFile(), source: "stdin")
        } else if FileManager.default.fileExists(atPath: input) {
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: input, isDirectory: &isDirectory), isDirectory.boolValue {
                throw fail("\(input) is a directory; give a report file, a report id or an OTLP/JSON file", status: 2)
            }
            let data: Data
            do { data = Data(try FileReader.read(input, maximumSize: 256 << 20)) } catch {
                throw fail("cannot read \(input): \(error)")
            }
            if data.first(where: { !($0 == 32 || $0 == 9 || $0 == 10 || $0 == 13) }).map({
                $0 == UInt8(ascii: "{") || $0 == UInt8(ascii: "[")
            }) == true {
                reports = try otlpReports(data, source: input)
            } else {
                do { reports = [try Report(file: input)] } catch {
                    throw fail("\(input) is neither a report file nor OTLP/JSON: \(error)")
                }
            }
        } else {
            reports = [try find(input, command: "symbolicate")]
        }
        guard !reports.isEmpty else { throw fail("no reports in \(input)") }
        let views = reports.map { ReportView($0, symbolicator: symbolicator) }
        if json { printJSON(views) } else { print(views.map(render.show).joined(separator: "\n\n")) }
        return 0
    }

    func otlpReports(_ data: Data, source: String) throws(Failure) -> [Report] {
        let records: [(record: LogRecord, serviceName: String?)]
        do { records = try OTLPInput.records(data) } catch { throw fail("\(source): \(error)") }
        return records.map { record, service in
            Report(
                kind: Report.kind(of: record), record: record, source: source, serviceName: service,
                stack: Report.stack(fromRecord: record),
                asyncStack: Report.stack(fromRecord: record, attribute: "apsio.async_stacktrace"),
                asyncAnchor: record[attribute: "apsio.async_stacktrace.anchor"]?.stringValue,
                recordThreads: Report.recordThreads(record))
        }
    }

    // MARK: Output

    func printJSON<T: Encodable>(_ value: T) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        if let data = try? encoder.encode(value) { print(String(decoding: data, as: UTF8.self)) }
    }

    func printTable(_ header: [String], _ rows: [[String]]) {
        let widths = header.indices.map { c in ([header] + rows).map { $0[c].count }.max() ?? 0 }
        func line(_ cells: [String]) -> String {
            cells.enumerated().map { $0.element.padding(toLength: widths[$0.offset], withPad: " ", startingAt: 0) }
                .joined(separator: "  ")
        }
        print(line(header))
        print(line(widths.map { String(repeating: "-", count: $0) }))
        rows.forEach { print(line($0)) }
    }
}
