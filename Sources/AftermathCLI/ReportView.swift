import AftermathNextLaunch
import AftermathOTLP
import AftermathSymbolication
import Foundation

/// A report as `show` presents it, symbolicated; encoded as-is for --json.
struct ReportView: Encodable {
    var kind: String
    var id: String
    var file: String?
    var app: String?
    var release: String?
    var build: String?
    var session: String?
    var time: String
    var os: String?
    /// A crash's machine: processors, their identity, how long the process had run.
    var machine: String?
    var signal: String?
    /// The explanation: the Swift runtime failure's when debug info names one, else the record's.
    var explanation: String?
    /// The explanation the record carries (written on the device, without debug info).
    var recordedExplanation: String?
    var swiftRuntimeFailure: Failure?
    var thread: Thread?
    /// Kind-specific facts (hang duration, exit reason, error fingerprint, ...), in order.
    var details: [Detail]
    var frames: [Frame]
    /// The thread's Swift async callers, innermost first (each `async`), after `frames`.
    var asyncFrames: [Frame]
    var registers: [Register]
    /// A crash's every thread, the crashing one first (files that record them); nil otherwise.
    var threads: [ThreadEntry]?
    var images: [Image]

    struct Failure: Encodable {
        var reason: String
        var message: String
        var function: String?
        var location: String?
    }

    struct Thread: Encodable {
        var id: UInt64?
        var name: String?
        var main: Bool?
        var role: String
        var unwinder: String?
        var truncated: Bool?
    }

    struct Detail: Encodable {
        var key: String
        var value: String
    }

    struct Frame: Encodable {
        var index: Int
        var address: String
        var image: String?
        var imageOffset: String?
        var inApp: Bool
        var function: String?
        var mangled: String?
        var offset: UInt64?
        var file: String?
        var line: Int?
        var column: Int?
        /// Functions inlined at this address, innermost first.
        var inlined: [Inlined]
        /// A Swift async caller: where it resumes (symbolicated as it is, not less one).
        var async: Bool?
    }

    struct Inlined: Encodable {
        var function: String
        var mangled: String
        var file: String?
        var line: Int?
        var column: Int?
    }

    struct Register: Encodable {
        var name: String
        var value: String
    }

    struct Image: Encodable {
        var name: String
        var path: String?
        var buildID: String
        var loadAddress: String
        var end: String?
        var inApp: Bool
        var main: Bool
        /// The binary found on this machine with the same build id.
        var binary: String?
        var debugFile: String?
        var debugSource: String?
        var debugInfoFound: Bool
        /// Files found but not used (another build id) and what is missing.
        var problems: [String]
    }
}

extension ReportView {
    /// Builds the view, symbolicating with `symbolicator` (nil: addresses only); a crash's
    /// threads: all, or only the crashing one.
    init(_ report: Report, symbolicator: DWARFSymbolicator?, crashedThreadOnly: Bool = false) {
        let r = report
        kind = r.kind.rawValue
        id = r.id
        file = r.source
        app = r.serviceName
        release = r["service.version"]
        build = r["app.build_id"]
        session = r["session.id"]
        time = Self.isoTime(r.record.timeUnixNano)
        os = [r["os.name"], r["os.version"]].compactMap { $0 }.joined(separator: " ").nilIfEmpty
        machine = r.crash.flatMap(Self.machine)
        signal = r.kind == .crash ? r["exception.type"] : nil
        recordedExplanation = r["exception.message"]
        explanation = recordedExplanation
        details = Self.details(r)
        frames = []
        asyncFrames = []
        registers = []
        images = []

        if let c = r.crash {
            thread = Thread(
                id: c.threadID, name: c.threadName, main: c.isMainThread, role: "crashed",
                unwinder: c.unwindStatus.fallbackReason.map { "\(c.unwinder.rawValue) (libunwind \($0))" }
                    ?? c.unwinder.rawValue,
                truncated: c.framesTruncated)
            registers = Self.registers(c.registers, architecture: c.context.architecture)
        } else if let h = r.hang {
            thread = Thread(
                id: h.threadID, name: h.threadName, main: nil, role: "blocked",
                unwinder: h.captureMethod.rawValue, truncated: h.framesTruncated)
        } else if r.kind != .abnormalExit {
            thread = Thread(
                id: r["thread.id"].flatMap { UInt64($0) }, name: r["thread.name"], main: nil,
                role: r.kind == .crash ? "crashed" : r.kind == .hang ? "blocked" : "recording",
                unwinder: nil, truncated: nil)
        }

        guard let stack = r.stack else { return }
        var used = Set<Int>()
        for (index, address) in stack.frames.enumerated() {
            let (frame, s) = Self.frame(index: index, address: address, stack: stack, symbolicator: symbolicator)
            if let imageIndex = stack.frameImages[index] { used.insert(imageIndex) }
            if index == 0, r.kind == .crash, let s, let failure = s.swiftRuntimeFailure {
                let place = s.location.map { " at \($0)" } ?? ""
                swiftRuntimeFailure = Failure(
                    reason: failure.reason, message: failure.message,
                    function: s.demangled, location: s.location?.description)
                explanation =
                    "Swift runtime failure: \(failure.reason) (\"\(failure.message)\") in \(s.demangled)\(place)."
            }
            frames.append(frame)
        }
        if let asyncStack = r.asyncStack {
            asyncFrames = Self.asyncFrames(
                asyncStack, anchor: r.asyncAnchor, machine: frames, symbolicator: symbolicator, used: &used)
        }
        if let c = r.crash, !c.threads.isEmpty {
            threads = Self.threads(
                c, report: r, symbolicator: symbolicator, crashedOnly: crashedThreadOnly, used: &used)
        } else if let listed = r.recordThreads, !listed.isEmpty {
            threads = ReportView.threads(
                listed, record: r.record, symbolicator: symbolicator, crashedOnly: crashedThreadOnly, used: &used)
        }
        if let main = stack.mainExecutable { used.insert(main) }
        for i in stack.images.indices where used.contains(i) {
            let image = stack.images[i]
            let files = symbolicator?.debugFiles(for: image)
            var problems = files?.problems ?? []
            if let error = symbolicator?.openError(for: image) { problems.append(error) }
            images.append(
                Image(
                    name: image.name, path: image.path, buildID: image.buildID,
                    loadAddress: Self.hex(image.loadAddress), end: stack.imageEnds[i].map { Self.hex($0) },
                    inApp: image.isInApp, main: i == stack.mainExecutable, binary: files?.binary,
                    debugFile: files?.debugFile, debugSource: files?.source?.rawValue,
                    debugInfoFound: files?.hasDWARF ?? false, problems: problems))
        }
    }

    /// The async callers of a stack: symbolicated as they are (resume addresses, not return
    /// addresses), marked async, without the links that a task-anchored chain lists ahead of the
    /// innermost async machine frame. Adds their images to `used`.
    static func asyncFrames(
        _ stack: Report.Stack, anchor: String?, machine: [Frame], symbolicator: DWARFSymbolicator?,
        used: inout Set<Int>
    ) -> [Frame] {
        var all = stack.frames.indices.map {
            frame(index: $0, address: stack.frames[$0], stack: stack, symbolicator: symbolicator, isResume: true).0
        }
        let stale = SwiftAsyncFunction.staleLinks(
            machine: machine.map { f in f.function.map { ((f.mangled ?? $0), $0) } },
            chain: all.map { $0.mangled ?? $0.function }, anchor: anchor)
        all.removeFirst(min(stale, all.count))
        for i in all.indices {
            all[i].index = i
            all[i].async = true
        }
        for i in stack.frameImages.dropFirst(stale).compactMap({ $0 }) { used.insert(i) }
        return all
    }

    /// One frame, symbolicated with `symbolicator` (nil: address and image only); a resume
    /// address (an async caller) is looked up as it is, a return address (index > 0) less one.
    static func frame(
        index: Int, address: UInt64, stack: Report.Stack, symbolicator: DWARFSymbolicator?, isResume: Bool = false
    ) -> (
        Frame, SymbolicatedFrame?
    ) {
        let image = stack.frameImages[index].map { stack.images[$0] }
        var frame = Frame(
            index: index, address: Self.hex(address), image: image?.name,
            imageOffset: image.map { Self.hex(address &- $0.loadAddress, width: 0) },
            inApp: image?.isInApp ?? false, inlined: [])
        guard let image, let symbolicator,
            let s = symbolicator.symbolicate(address: address, image: image, isReturnAddress: !isResume && index > 0)
        else { return (frame, nil) }
        frame.function = s.demangled
        frame.mangled = s.function == s.demangled ? nil : s.function
        frame.offset = s.offset
        frame.file = s.location?.file
        frame.line = s.location?.line
        frame.column = s.location.map(\.column).flatMap { $0 > 0 ? $0 : nil }
        frame.inlined = s.inlined.map {
            Inlined(
                function: $0.demangled, mangled: $0.name, file: $0.location?.file,
                line: $0.location?.line, column: $0.location.map(\.column).flatMap { $0 > 0 ? $0 : nil })
        }
        return (frame, s)
    }

    static func details(_ r: Report) -> [Detail] {
        let keys: [(String, String)] = [
            ("exception.type", "type"), ("apsio.error.fingerprint", "fingerprint"),
            ("apsio.hang.duration", "duration (ms)"), ("apsio.hang.unfinished", "unfinished"),
            ("apsio.hang.thread_state", "thread state"), ("apsio.hang.wait_channel", "wait channel"),
            ("apsio.hang.syscall_name", "system call"), ("apsio.hang.threshold", "threshold (ms)"),
            ("apsio.hang.source", "hang source"),
            ("apsio.exit.reason", "exit reason"), ("apsio.exit.source", "exit source"),
            ("apsio.exit.evidence", "evidence"), ("apsio.exit.foreground", "foreground"),
            ("app.screen.name", "screen"), ("session.previous_id", "previous session"),
            ("apsio.crash.fault_address", "fault address"), ("apsio.crash.sender_pid", "sent by pid"),
            ("apsio.crash.partial", "partial"), ("apsio.crash.handler_fault", "handler faulted"),
        ]
        return keys.compactMap { key, label in
            if key == "exception.type" && r.kind == .crash { return nil }
            return r[key].map { Detail(key: label, value: $0) }
        }
    }

    /// x86-64: the mcontext gregs order; arm64: x0-x30, sp, pc, pstate.
    static func registers(_ values: [UInt64], architecture: Architecture) -> [Register] {
        let names: [String]
        switch architecture {
        case .x86_64:
            names = [
                "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15", "rdi", "rsi", "rbp", "rbx", "rdx",
                "rax", "rcx", "rsp", "rip", "eflags", "csgsfs", "err", "trapno", "oldmask", "cr2",
            ]
        case .arm64:
            names = (0...28).map { "x\($0)" } + ["fp", "lr", "sp", "pc", "pstate"]
        case .unknown:
            names = []
        }
        return values.enumerated().map { i, v in Register(name: i < names.count ? names[i] : "r\(i)", value: hex(v)) }
    }

    static func hex(_ value: UInt64, width: Int = 16) -> String {
        let digits = String(value, radix: 16)
        return "0x" + String(repeating: "0", count: max(0, width - digits.count)) + digits
    }

    /// "2 CPUs, GenuineIntel family 6 model 207 stepping 2; the process had run 12.3 s"; nil
    /// for a crash file without its machine.
    static func machine(_ c: CrashReport) -> String? {
        guard let m = c.machine else { return nil }
        var parts = ["\(m.cpuCount) CPU\(m.cpuCount == 1 ? "" : "s")"]
        if let x86 = c.context.architecture == .x86_64 ? m.x86Identity : nil {
            parts[0] +=
                ", "
                + [m.cpuVendor.nilIfEmpty, "family \(x86.family) model \(x86.model) stepping \(x86.stepping)"]
                .compactMap { $0 }.joined(separator: " ")
        } else if m.cpuSignature != 0 {
            parts[0] += ", MIDR 0x" + String(m.cpuSignature, radix: 16)
        }
        if let start = m.processStartUnixNano, c.timeUnixNano >= start {
            parts.append(String(format: "the process had run %.1f s", Double(c.timeUnixNano - start) / 1e9))
        }
        if let user = c.cpuUserMicroseconds, let system = c.cpuSystemMicroseconds {
            parts.append(String(format: "CPU %.2f s user, %.2f s system", Double(user) / 1e6, Double(system) / 1e6))
        }
        return parts.joined(separator: "; ")
    }

    static func isoTime(_ ns: UInt64) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: Date(timeIntervalSince1970: Double(ns) / 1e9))
    }
}

extension String {
    var nilIfEmpty: String? { isEmpty ? nil : self }
}
