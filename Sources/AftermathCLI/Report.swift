import AftermathNextLaunch
import AftermathOTLP
import AftermathSymbolication
import Foundation

/// One report, from a reports directory, a report file or an OTLP/JSON record, with what
/// symbolication needs: the stack and its images (with paths when the report file is at hand).
struct Report {
    var kind: PendingReport.Kind
    var record: LogRecord
    /// The file it came from (a report file or an OTLP/JSON file).
    var source: String?
    var serviceName: String?
    var stack: Stack?
    /// The Swift async callers of the stack's thread (resume addresses, innermost first) and
    /// where their chain started (apsio.async_stacktrace.anchor); nil without them.
    var asyncStack: Stack?
    var asyncAnchor: String?
    /// Crash reports read from their file: registers, thread, unwinder.
    var crash: CrashReport?
    var hang: HangReport?
    /// A record's apsio.threads, when no report file is at hand (an OTLP/JSON record).
    var recordThreads: [StackFormatter.ThreadEntry]?

    struct Stack {
        var frames: [UInt64]
        /// Each frame's image (an index into `images`), nil outside every image.
        var frameImages: [Int?]
        var images: [ImageReference]
        /// The images' end addresses, when the report has them.
        var imageEnds: [UInt64?]
        var mainExecutable: Int?
    }

    subscript(_ key: String) -> String? { record[attribute: key].map(Self.text) }

    var id: String {
        self["app.crash.id"] ?? self["log.record.uid"] ?? source.map { ($0 as NSString).lastPathComponent } ?? "?"
    }

    static func text(_ value: AttributeValue) -> String {
        switch value {
        case .string(let s): return s
        case .int(let i): return String(i)
        case .bool(let b): return String(b)
        case .double(let d): return String(d)
        case .bytes(let b): return b.map { String(format: "%02x", $0) }.joined()
        case .array(let a): return "[" + a.map(text).joined(separator: ", ") + "]"
        case .kvlist(let l): return "{" + l.map { "\($0.key): \(text($0.value))" }.joined(separator: ", ") + "}"
        }
    }

    /// The kind a record is, by its event name (handled errors have none).
    static func kind(of record: LogRecord) -> PendingReport.Kind {
        switch record.eventName {
        case "app.crash": return .crash
        case "apsio.hang": return .hang
        case "app.abnormal_exit": return .abnormalExit
        default: return .error
        }
    }
}

// MARK: - From reports on disk

extension Report {
    /// A pending report from a reports directory; hangs and errors are read again from their
    /// file for the images' paths.
    init(pending r: PendingReport, serviceName: String?) {
        self.init(kind: r.kind, record: r.record, source: r.path, serviceName: serviceName)
        let inApp = Self.inAppImages(record)
        switch r.kind {
        case .crash:
            if let c = r.crash {
                crash = c
                stack = Self.stack(frames: c.frames, images: c.images, inApp: inApp)
                setAsync(c.asyncChain, images: c.images, inApp: inApp)
                self.serviceName = serviceName ?? c.context.serviceName
            }
        case .hang:
            if let bytes = try? FileReader.read(r.path), let file = try? ReportFile.decode(bytes, salvage: true),
                let h = try? HangReport(file: file)
            {
                hang = h
                stack = Self.stack(frames: h.frames, images: h.images, inApp: inApp)
                setAsync(h.asyncChain, images: h.images, inApp: inApp)
                self.serviceName = serviceName ?? h.context.serviceName
            }
        case .error:
            if let bytes = try? FileReader.read(r.path), let e = try? HandledErrorFile.decode(bytes) {
                stack = Self.stack(frames: e.frames, images: e.images, inApp: inApp)
                setAsync(e.asyncChain, images: e.images, inApp: inApp)
                self.serviceName = serviceName ?? e.context.serviceName
            }
        case .abnormalExit:
            if let bytes = try? FileReader.read(r.path), let run = try? RunFile.decode(bytes) {
                self.serviceName = serviceName ?? run.context.serviceName
            }
        }
        if stack == nil {
            stack = Self.stack(fromRecord: record)
            asyncStack = Self.stack(fromRecord: record, attribute: "apsio.async_stacktrace")
            asyncAnchor = self["apsio.async_stacktrace.anchor"]
        }
    }

    /// The async callers of a report read from its file.
    mutating func setAsync(_ chain: SwiftAsyncChain?, images: [LoadedImage], inApp: [String: Bool]) {
        guard let chain, !chain.resumes.isEmpty else { return }
        asyncStack = Self.stack(frames: chain.resumes, images: images, inApp: inApp)
        asyncAnchor = chain.anchor.rawValue
    }

    /// A report file copied from a device (.crash, .hang, .error).
    init(file path: String) throws {
        let bytes = try FileReader.read(path)
        let now = UInt64(Date().timeIntervalSince1970 * 1e9)
        if path.hasSuffix(".error") {
            let e = try HandledErrorFile.decode(bytes)
            let record = e.record(observedTimeUnixNano: now)
            self.init(kind: .error, record: record, source: path, serviceName: e.context.serviceName)
            stack = Self.stack(frames: e.frames, images: e.images, inApp: Self.inAppImages(record))
            setAsync(e.asyncChain, images: e.images, inApp: Self.inAppImages(record))
            return
        }
        let file = try ReportFile.decode(bytes, salvage: true)
        if let h = try? HangReport(file: file) {
            let record = HangRecordMapper.hang(h, observedTimeUnixNano: now)
            self.init(kind: .hang, record: record, source: path, serviceName: h.context.serviceName)
            hang = h
            stack = Self.stack(frames: h.frames, images: h.images, inApp: Self.inAppImages(record))
            setAsync(h.asyncChain, images: h.images, inApp: Self.inAppImages(record))
            return
        }
        let c = try file.crashReport()
        let record = RecordMapper.crash(c, observedTimeUnixNano: now)
        self.init(kind: .crash, record: record, source: path, serviceName: c.context.serviceName)
        crash = c
        stack = Self.stack(frames: c.frames, images: c.images, inApp: Self.inAppImages(record))
        setAsync(c.asyncChain, images: c.images, inApp: Self.inAppImages(record))
    }

    static func stack(frames: [UInt64], images: [LoadedImage], inApp: [String: Bool]) -> Stack {
        let sorted = images.sorted { $0.start < $1.start }
        let references = sorted.map { image in
            ImageReference(
                name: image.name,
                path: image.isVDSO || image.isAnonymous || image.isPathTruncated ? nil : image.path,
                buildID: image.buildID, loadAddress: image.start,
                isInApp: inApp[image.name + "/" + image.buildID] ?? image.isMainExecutable,
                isTextHash: image.isBuildIDTextHash)
        }
        let frameImages = frames.map { address in sorted.firstIndex { $0.contains(address) } }
        return Stack(
            frames: frames, frameImages: frameImages, images: references, imageEnds: sorted.map(\.end),
            mainExecutable: sorted.firstIndex { $0.isMainExecutable })
    }

    struct ImageEntry: Decodable {
        var name: String
        var build_id: String?
        var build_id_type: String?
        var load_address: String?
        var in_app: Bool?
    }

    /// apsio.crash.images: in_app by name and build id.
    static func inAppImages(_ record: LogRecord) -> [String: Bool] {
        var result: [String: Bool] = [:]
        for entry in imageEntries(record) { result[entry.name + "/" + (entry.build_id ?? "")] = entry.in_app ?? false }
        return result
    }

    static func imageEntries(_ record: LogRecord) -> [ImageEntry] {
        guard let json = record[attribute: "apsio.crash.images"]?.stringValue else { return [] }
        return (try? JSONDecoder().decode([ImageEntry].self, from: Data(json.utf8))) ?? []
    }

    /// The stack from exception.stacktrace (or another attribute of its format) and
    /// apsio.crash.images alone (no paths): what a backend or a collector has.
    static func stack(fromRecord record: LogRecord, attribute: String = "exception.stacktrace") -> Stack? {
        record[attribute: attribute]?.stringValue.flatMap { stack(fromText: $0, record: record) }
    }

    /// A stack in exception.stacktrace's format, its images from the record's apsio.crash.images.
    static func stack(fromText text: String, record: LogRecord) -> Stack? {
        let entries = imageEntries(record)
        let images = entries.map { e in
            ImageReference(
                name: e.name, path: nil, buildID: e.build_id ?? "",
                loadAddress: parseHex(e.load_address ?? "") ?? 0, isInApp: e.in_app ?? false,
                isTextHash: e.build_id_type == "text_hash")
        }
        var frames: [UInt64] = [], frameImages: [Int?] = []
        for line in text.split(separator: "\n") {
            // "3 libc.so.6 0x00007f1c2a4b5c6d + 0x9c6d" or "3 ??? 0x…"
            let fields = line.split(separator: " ")
            guard fields.count >= 3, let address = parseHex(String(fields[2])) else { continue }
            let name = String(fields[1])
            frames.append(address)
            let candidates = images.indices.filter { images[$0].name == name && images[$0].loadAddress <= address }
            frameImages.append(candidates.max { images[$0].loadAddress < images[$1].loadAddress })
        }
        guard !frames.isEmpty else { return nil }
        let mainName = record[attribute: "app.build_id"]?.stringValue
        return Stack(
            frames: frames, frameImages: frameImages, images: images,
            imageEnds: images.map { _ in nil },
            mainExecutable: images.firstIndex { $0.buildID == mainName && !$0.buildID.isEmpty })
    }

    /// A record's apsio.threads; nil without it or when it is not that JSON.
    static func recordThreads(_ record: LogRecord) -> [StackFormatter.ThreadEntry]? {
        guard let json = record[attribute: "apsio.threads"]?.stringValue else { return nil }
        return try? JSONDecoder().decode([StackFormatter.ThreadEntry].self, from: Data(json.utf8))
    }

    static func parseHex(_ s: String) -> UInt64? {
        let digits = s.hasPrefix("0x") || s.hasPrefix("0X") ? s.dropFirst(2) : Substring(s)
        return digits.isEmpty ? nil : UInt64(digits, radix: 16)
    }
}
