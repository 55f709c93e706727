import AftermathNextLaunch
import AftermathOTLP
import AftermathSymbolication

extension ReportView {
    /// One thread of a crash: who it is, how its registers were taken (or why they were not),
    /// its frames symbolicated as the crashing thread's are.
    struct ThreadEntry: Encodable {
        var id: UInt64
        var name: String
        var crashed: Bool
        var main: Bool
        /// One of Aftermath's own threads.
        var aftermath: Bool
        /// The kernel's state letter at the capture.
        var state: String
        /// signal, crash, syscall or none.
        var context: String
        /// Why it has no full context (blocks_signal, no_answer, ...); nil when it has one.
        var missingContext: String?
        /// It crashed too, while the first crash was written: its signal.
        var alsoCrashedSignal: Int32?
        var unwinder: String
        var truncated: Bool
        var frames: [Frame]
        /// Its Swift async callers, innermost first.
        var asyncFrames: [Frame]
    }

    /// Every thread of a crash, the crashing one first (with the crash's own frames); only that
    /// one when `crashedOnly`. Adds the images their frames are in to `used`.
    static func threads(
        _ c: CrashReport, report: Report, symbolicator: DWARFSymbolicator?, crashedOnly: Bool, used: inout Set<Int>
    ) -> [ThreadEntry] {
        let inApp = Report.inAppImages(report.record)
        let ordered = c.threads.filter(\.crashed) + c.threads.filter { !$0.crashed }
        var entries: [ThreadEntry] = []
        for t in ordered where !crashedOnly || t.crashed {
            let frames = t.crashed && !c.frames.isEmpty ? c.frames : t.frames
            let stack = Report.stack(frames: frames, images: c.images, inApp: inApp)
            for i in stack.frameImages.compactMap({ $0 }) { used.insert(i) }
            let machine = frames.indices.map {
                frame(index: $0, address: frames[$0], stack: stack, symbolicator: symbolicator).0
            }
            let chain = t.crashed ? (c.asyncChain ?? t.asyncChain) : t.asyncChain
            let asyncStack = chain.map { Report.stack(frames: $0.resumes, images: c.images, inApp: inApp) }
            let asyncFrames =
                asyncStack.map {
                    Self.asyncFrames(
                        $0, anchor: chain?.anchor.rawValue, machine: machine, symbolicator: symbolicator, used: &used)
                } ?? []
            let unwinder = t.crashed ? c.unwinder : t.unwinder
            let status = t.crashed ? c.unwindStatus : t.unwindStatus
            entries.append(
                ThreadEntry(
                    id: t.id, name: t.name, crashed: t.crashed, main: t.isMain, aftermath: t.isAftermath,
                    state: t.state, context: t.contextSource.rawValue, missingContext: t.missingContext?.rawValue,
                    alsoCrashedSignal: t.alsoCrashedSignal,
                    unwinder: status.fallbackReason.map { "\(unwinder.rawValue) (libunwind \($0))" }
                        ?? unwinder.rawValue,
                    truncated: t.crashed ? c.framesTruncated : t.framesTruncated,
                    frames: machine, asyncFrames: asyncFrames))
        }
        return entries
    }

    /// Every thread of a record's apsio.threads (an OTLP/JSON record: no report file), in its
    /// order (the crashing one first), or only the crashing one when `crashedOnly`. Adds the
    /// images their frames are in to `used`.
    static func threads(
        _ listed: [StackFormatter.ThreadEntry], record: LogRecord, symbolicator: DWARFSymbolicator?, crashedOnly: Bool,
        used: inout Set<Int>
    ) -> [ThreadEntry] {
        var entries: [ThreadEntry] = []
        for t in listed where !crashedOnly || t.crashed {
            var machine: [Frame] = []
            if let stack = Report.stack(fromText: t.stacktrace, record: record) {
                for (i, address) in stack.frames.enumerated() {
                    machine.append(frame(index: i, address: address, stack: stack, symbolicator: symbolicator).0)
                    if let image = stack.frameImages[i] { used.insert(image) }
                }
            }
            let asyncFrames =
                t.async_stacktrace.flatMap { Report.stack(fromText: $0, record: record) }.map {
                    Self.asyncFrames(
                        $0, anchor: t.async_anchor, machine: machine, symbolicator: symbolicator, used: &used)
                } ?? []
            entries.append(
                ThreadEntry(
                    id: t.id, name: t.name, crashed: t.crashed, main: t.main, aftermath: t.aftermath ?? false,
                    state: t.state, context: t.context, missingContext: t.why,
                    alsoCrashedSignal: t.also_crashed_signal, unwinder: t.unwinder,
                    truncated: t.frames_truncated ?? false, frames: machine, asyncFrames: asyncFrames))
        }
        return entries
    }

    /// How a thread's registers were taken, in words.
    static func contextDescription(_ t: ThreadEntry) -> String {
        let how: String
        switch t.context {
        case "signal": how = "registers from its signal frame"
        case "crash": how = "registers from its crash"
        case "syscall": how = "sp and pc only, from /proc"
        case "parked": how = "sp and pc it noted before its wait"
        default: how = "no registers"
        }
        let why: [String: String] = [
            "blocks_signal": "it blocks every capture signal", "stopped": "it was stopped or traced",
            "uninterruptible": "it was in uninterruptible sleep", "no_answer": "no answer by the deadline",
            "signal_failed": "the signal could not be sent", "no_signal": "no capture signal could be installed",
            "exiting": "it was exiting", "aftermath": "one of Aftermath's own threads, never paused",
            "asleep": "left asleep in a call a signal would cut short",
        ]
        return how + (t.missingContext.map { ": " + (why[$0] ?? $0) } ?? "")
    }
}
