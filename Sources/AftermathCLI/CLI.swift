import AftermathNextLaunch
import AftermathOTLP
import AftermathSymbolication
import Foundation

/// The debug command's three views.
enum CLI {
    static func list(_ reports: [PendingReport], rejected: [RejectedFile], directories: [ReportDirectory]) {
        if directories.isEmpty { print("no reports directory found") }
        if reports.isEmpty { print("no pending reports in \(directories.map(\.root).joined(separator: ", "))") }
        let rows = reports.map { r -> [String] in
            [r.kind.rawValue, isoTime(r.record.timeUnixNano), summary(r.record),
             r.record[attribute: "service.version"]?.stringValue ?? "", id(r)]
        }
        if !rows.isEmpty { printTable(["kind", "time (UTC)", "what", "release", "id"], rows) }
        for s in rejected {
            print("rejected \(s.path): \(s.reason)")
        }
    }

    static func show(_ query: String, in reports: [PendingReport]) -> Int32 {
        let q = query.lowercased()
        let matches = reports.filter {
            id($0).lowercased().hasPrefix(q) || ($0.path as NSString).lastPathComponent.lowercased().hasPrefix(q)
        }
        guard matches.count == 1, let r = matches.first else {
            FileHandle.standardError.write(Data("aftermath show: \(matches.isEmpty ? "no" : "\(matches.count)") reports match \(query)\n".utf8))
            return 1
        }
        let rec = r.record
        print("\(rec.eventName ?? r.kind.rawValue)  \(isoTime(rec.timeUnixNano))")
        print("file: \(r.path)")
        if let type = rec[attribute: "exception.type"]?.stringValue { print("type: \(type)") }
        if let message = rec[attribute: "exception.message"]?.stringValue { print("\n\(message)\n") }
        for key in ["service.version", "app.build_id", "session.id", "os.name", "os.version", "thread.name",
                    "apsio.hang.duration", "apsio.hang.unfinished", "apsio.exit.reason", "apsio.exit.source"] {
            if let v = rec[attribute: key] { print("\(key): \(describe(v))") }
        }
        if let crash = r.crash {
            print("\nCrashed thread \(crash.threadID) \"\(crash.threadName)\"\(crash.isMainThread ? " (main)" : ""), unwound with \(crash.unwinder)\(crash.framesTruncated ? ", truncated" : ""):")
            let symbols = crash.symbolicatedFrames()
            for (i, address) in crash.frames.enumerated() {
                let image = crash.image(containing: address)
                let where_ = image.map { "\($0.name) + 0x\(String(address - $0.start, radix: 16))" } ?? "???"
                let symbol = symbols[i].map { "  \($0.demangled) + \($0.offset)" } ?? ""
                print(String(format: "%4d  0x%016llx  ", i, address) + where_ + symbol)
            }
            print("\nImages:")
            for image in crash.images.sorted(by: { $0.start < $1.start }) {
                print(String(format: "  0x%016llx-0x%016llx  ", image.start, image.end)
                      + "\(image.buildID.isEmpty ? "(no build id)" : image.buildID)  \(image.path)\(image.isMainExecutable ? "  [main]" : "")")
            }
        } else if let stack = rec[attribute: "exception.stacktrace"]?.stringValue {
            print("\nStack:\n\(stack)")
        }
        return 0
    }

    static func dump(_ reports: [PendingReport]) -> String {
        let resource = SDK.resource(serviceName: "aftermath-cli", serviceVersion: SDK.version)
        let batch = LogBatch(resource: resource, scopeName: SDK.scopeName, scopeVersion: SDK.version,
                             records: reports.map(\.record))
        return OTLPJSON.encodeString(batch, pretty: true)
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
            return "hang \(ms) ms" + (record[attribute: "apsio.hang.unfinished"]?.boolValue == true ? " (unfinished)" : "")
        }
        return record.eventName ?? ""
    }

    static func describe(_ v: AttributeValue) -> String {
        switch v {
        case .string(let s): return s
        case .int(let i): return String(i)
        case .bool(let b): return String(b)
        case .double(let d): return String(d)
        default: return "\(v)"
        }
    }

    static func isoTime(_ ns: UInt64) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: Date(timeIntervalSince1970: Double(ns) / 1e9))
    }

    static func printTable(_ header: [String], _ rows: [[String]]) {
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
