import Aftermath
import AftermathNextLaunch
import AftermathOTLP
import AftermathTesting
import AftermathSymbolication
import HarnessSupport
import CHarnessFaults
import Foundation

/// The table's columns, in order, after the scenario's name.
enum Column: String, CaseIterable, Sendable, TableColumn {
    case signal = "signal exp/got"
    case sameExit = "same w/o"
    case record = "record"
    case sessionRelease = "session/release"
    case chain = "chain L3<L2<L1"
    case images = "images+ids"
    case frames = "frames"
    case thread = "thread"
    case swiftBacktrace = "swift bt"
    case pending = "pending"
    case handlerCalls = "handler calls"
    case threads = "threads"
    case show = "show"
    case minidump = "minidump"
}

typealias CheckResult = TableCheck<Column>
typealias Row = TableRow<Column>

/// Judges one scenario's evidence.
struct Checks {
    var evidence: Evidence
    /// The record's stack, symbolicated (empty without a record).
    var frames: [StackFrame]
    /// The harness executable's file name: the main executable's image name in the record.
    var executableName: String
    /// Symbolicates a stack in exception.stacktrace's format against the record's images.
    var symbolicate: @Sendable (String) -> [StackFrame] = { _ in [] }

    var scenario: Scenario { evidence.scenario }
    var record: LogRecord? { evidence.crashRecords.count == 1 ? evidence.crashRecords[0] : nil }
    private func attribute(_ key: String) -> String? { record?[attribute: key]?.stringValue }

    func all() -> [CheckResult] {
        [
            signal(), sameExit(), recordType(), sessionRelease(), chain(), images(), frameCount(), thread(),
            swiftBacktrace(), pending(), handlerCalls(), threads(), show(), minidump(),
        ]
    }

    /// With the handler detector: no malloc, free, mutex or dl_iterate_phdr on the signal stack.
    func handlerCalls() -> CheckResult {
        guard let log = evidence.detectorLog else { return .skip(.handlerCalls) }
        let lines = log.split(separator: "\n").map(String.init)
        guard lines.contains(where: { $0.hasSuffix(" loaded") }) else {
            return .fail(.handlerCalls, "not loaded", "the handler detector did not load into the child")
        }
        let calls = lines.filter { $0.contains("called on the signal stack") }
        if calls.isEmpty { return .pass(.handlerCalls, "none") }
        return .fail(
            .handlerCalls, "\(calls.count)",
            "called on the signal stack: " + calls.prefix(4).joined(separator: "; "))
    }

    func signal() -> CheckResult {
        let got = evidence.withAftermath.termination
        let cell =
            "\(SignalDescription.name(scenario.signal))/\(got.signal.map(SignalDescription.name) ?? got.description)"
        let late = evidence.withAftermath.milliseconds - evidence.withoutAftermath.milliseconds
        if got == .signaled(scenario.signal), scenario.setup.holdsLoaderLock, late >= 1000 {
            return .fail(
                .signal, cell,
                "with Aftermath the child took \(late) ms longer to die than without (limit 1,000 ms)")
        }
        if got == .signaled(scenario.signal) { return .pass(.signal, cell) }
        return .fail(
            .signal, cell,
            "with Aftermath the child ended with \(got), expected \(SignalDescription.name(scenario.signal))")
    }

    func sameExit() -> CheckResult {
        let with = evidence.withAftermath.termination, without = evidence.withoutAftermath.termination
        if with == without, with.signal != nil { return .pass(.sameExit, "yes") }
        if with == without {
            return .fail(.sameExit, "no crash", "neither child died of a signal: both ended with \(with)")
        }
        return .fail(.sameExit, "NO", "with Aftermath: \(with); without: \(without)")
    }

    func recordType() -> CheckResult {
        let count = evidence.crashRecords.count
        guard let record else {
            let why = evidence.exportProblems.isEmpty ? "" : " (\(evidence.exportProblems.joined(separator: "; ")))"
            return .fail(
                .record, count == 0 ? "none" : "\(count) records",
                "expected exactly one app.crash record, got \(count)\(why)")
        }
        let type = record[attribute: "exception.type"]?.stringValue ?? "?"
        guard type.hasPrefix(SignalDescription.name(scenario.signal)) else {
            return .fail(.record, type, "exception.type is \(type), expected \(scenario.exceptionType)")
        }
        if type == scenario.exceptionType { return .pass(.record, type) }
        return .fail(.record, type, "exception.type is \(type), expected \(scenario.exceptionType)")
    }

    func sessionRelease() -> CheckResult {
        guard record != nil else { return .skip(.sessionRelease) }
        var problems: [String] = []
        let session = attribute("session.id"), version = attribute("service.version"), build = attribute("app.build_id")
        if evidence.printedSession == nil { problems.append("the crashing child printed no context line") }
        if session == nil || session != evidence.printedSession {
            problems.append("session.id \(session ?? "missing") != crashed run's \(evidence.printedSession ?? "?")")
        }
        if version != ChildMode.crashedVersion {
            problems.append("service.version \(version ?? "missing") != crashed run's \(ChildMode.crashedVersion)")
        }
        if build == nil || build?.isEmpty == true || build != evidence.printedBuildID {
            problems.append("app.build_id \(build ?? "missing") != crashed run's \(evidence.printedBuildID ?? "?")")
        }
        if problems.isEmpty { return .pass(.sessionRelease, "ok") }
        return .fail(.sessionRelease, "FAIL", problems.joined(separator: "; "))
    }

    func chain() -> CheckResult {
        guard record != nil, scenario.chained else { return .skip(.chain) }
        let names = ["crashChainLevel3", "crashChainLevel2", "crashChainLevel1"]
        let positions = names.map { name in
            frames.firstIndex { $0.symbol?.contains("\(name)(") == true }
        }
        let shown = positions.map { $0.map { "#\($0)" } ?? "?" }.joined(separator: "<")
        let found = positions.compactMap { $0 }
        if found.count == 3, found[0] < found[1], found[1] < found[2] { return .pass(.chain, shown) }
        let symbolicated = frames.filter { $0.symbol != nil }.count
        return .fail(
            .chain, shown,
            "chain not found in order (Level3, Level2, Level1) in the stack "
                + "(\(frames.count) frames, \(symbolicated) symbolicated)")
    }

    func images() -> CheckResult {
        guard let json = attribute("apsio.crash.images") else {
            return record == nil ? .skip(.images) : .fail(.images, "none", "no apsio.crash.images")
        }
        let list: [ImageEntry]
        do { list = try ImageEntry.decodeList(json) } catch {
            return .fail(.images, "bad JSON", "apsio.crash.images does not parse: \(error)")
        }
        var problems: [String] = []
        for entry in list where entry.buildID.isEmpty { problems.append("\(entry.name) has no build_id") }
        if let main = list.first(where: { $0.name == executableName }) {
            if !main.hasSHA1BuildID { problems.append("\(main.name) build_id '\(main.buildID)' is not 40 hex digits") }
            if !main.inApp { problems.append("\(main.name) is not in_app") }
            if main.buildID != attribute("app.build_id") { problems.append("\(main.name) build_id != app.build_id") }
        } else {
            problems.append("no entry for the main executable \(executableName)")
        }
        if let libc = list.first(where: { $0.name.hasPrefix("libc.so") }) {
            if !libc.hasSHA1BuildID { problems.append("\(libc.name) build_id '\(libc.buildID)' is not 40 hex digits") }
            if libc.inApp { problems.append("\(libc.name) is in_app") }
        } else {
            problems.append("no entry for libc")
        }
        for entry in list where entry.loadAddressValue == nil {
            problems.append("\(entry.name) load_address '\(entry.loadAddress)'")
        }
        if problems.isEmpty { return .pass(.images, "ok (\(list.count))") }
        return .fail(.images, "FAIL (\(list.count))", problems.joined(separator: "; "))
    }

    func frameCount() -> CheckResult {
        guard record != nil else { return .skip(.frames) }
        let unknown = frames.filter { $0.imageName == nil }.count
        let unwinder = attribute("apsio.crash.unwinder") ?? "?"
        let fallback = attribute("apsio.crash.unwind_fallback")
        let cell = "\(frames.count) \(unwinder == "frame_pointer" ? "fp" : unwinder == "libunwind" ? "lu" : unwinder)"
        // With the loader's lock held, libunwind cannot finish in the handler: the frame-pointer
        // stack, and the record says why. A pc in no image (code in an anonymous mapping) is
        // unwound by the handler itself, by frame pointers in a process that never loaded
        // libunwind (it is loaded at its first use). Otherwise libunwind's stack, with no
        // fallback (the next launch's, unwound from the crash file, unless the handler unwinds
        // itself: where the file cannot hold the stacks, libunwind is loaded at start).
        let expected: (String, String?) =
            scenario.setup == .loaderLockHeldUnwindInHandler
            ? ("frame_pointer", "timed_out")
            : scenario.fault == .illegalInstruction ? ("frame_pointer", nil) : ("libunwind", nil)
        if (unwinder, fallback) != expected {
            return .fail(
                .frames, cell,
                "apsio.crash.unwinder \(unwinder), unwind_fallback \(fallback ?? "none"); expected "
                    + "\(expected.0), \(expected.1 ?? "none")")
        }
        if frames.count >= scenario.minimumFrames, attribute("apsio.crash.frames_truncated") == nil {
            return .pass(.frames, cell)
        }
        return .fail(
            .frames, cell,
            "\(frames.count) frames (\(unknown) outside any image), expected at least \(scenario.minimumFrames)")
    }

    func thread() -> CheckResult {
        guard let record else { return .skip(.thread) }
        let isMain = record[attribute: "apsio.crash.main_thread"]?.boolValue
        let name = attribute("thread.name") ?? "?"
        let expectMain = scenario.threadName == nil
        var problems: [String] = []
        if isMain != expectMain {
            problems.append(
                "apsio.crash.main_thread is \(isMain.map(String.init) ?? "missing"), expected \(expectMain)")
        }
        if let expected = scenario.threadName, name != expected {
            problems.append("thread.name is '\(name)', expected '\(expected)'")
        }
        let cell = expectMain ? "main" : name
        if problems.isEmpty { return .pass(.thread, cell) }
        return .fail(.thread, cell, problems.joined(separator: "; "))
    }

    /// The Swift runtime's backtracer must still print its report when Aftermath is installed,
    /// and only after Aftermath's file is in place. Not applicable where it is off (it did not
    /// print without Aftermath either).
    func swiftBacktrace() -> CheckResult {
        let printedWithout = Self.backtracerPrinted(evidence.withoutAftermath.standardError)
        let printedWith = Self.backtracerPrinted(evidence.withAftermath.standardError)
        guard printedWithout else {
            return printedWith ? .pass(.swiftBacktrace, "yes (only w/)") : .skip(.swiftBacktrace, "off")
        }
        guard printedWith else {
            return .fail(.swiftBacktrace, "NO", "the Swift backtracer printed without Aftermath but not with it")
        }
        guard evidence.withAftermath.watchResult == true else {
            return .fail(
                .swiftBacktrace, "before file", "the backtracer's report appeared before the crash file was committed")
        }
        // It pauses every other thread first; one it cannot pause is missing from its report.
        let unsuspended = Self.unsuspendedThreads(evidence.withAftermath.standardError)
        if unsuspended > Self.unsuspendedThreads(evidence.withoutAftermath.standardError) {
            return .fail(
                .swiftBacktrace, "incomplete",
                "the backtracer could not pause \(unsuspended) thread(s) with Aftermath (\"failed to suspend thread\")")
        }
        return .pass(.swiftBacktrace, "after file")
    }

    /// How many "failed to suspend thread" lines the backtracer printed.
    static func unsuspendedThreads(_ stderr: String) -> Int {
        stderr.components(separatedBy: "failed to suspend thread").count - 1
    }

    static func backtracerPrinted(_ stderr: String) -> Bool {
        ScenarioRunner.backtracerMarkers.contains { stderr.contains($0) }
    }

    /// The crash left exactly one committed file, named by its app.crash.id, and the next launch
    /// removed it after the exporter acknowledged the record. A run's unwritten reserve
    /// (`<id>.crash.tmp`, created and sized at start so the handler need not create a file)
    /// may remain: the next launch leaves its own, which the launch after it removes.
    func pending() -> CheckResult {
        let before = evidence.crashFilesAfterCrash, after = evidence.crashFilesAfterNextLaunch
        let crashID = attribute("app.crash.id")?.replacingOccurrences(of: "-", with: "")
        let leftovers = after.filter { name in
            let path = (evidence.crashesDirectory as NSString).appendingPathComponent(name)
            let isEmptyReserve =
                name.hasSuffix(".crash.tmp")
                && ReportCollector.reserveState(path) == .emptyOfDeadRun
            return !isEmptyReserve || (crashID.map { name.hasPrefix($0) } ?? false)
        }
        let cell = "\(before.count)→\(leftovers.count)"
        var problems: [String] = []
        if before.count != 1 || evidence.committedAfterCrash != before {
            problems.append(
                "after the crash crashes/ held \(before.isEmpty ? "nothing" : before.joined(separator: ", ")), "
                    + "expected one crash report (a .crash file, or the reserve committed in place)"
            )
        } else if let crashID, before[0].hasSuffix(".crash"), before[0] != crashID + ".crash" {
            problems.append("the crash file \(before[0]) is not named by app.crash.id \(crashID)")
        }
        if !leftovers.isEmpty {
            problems.append("after the next launch crashes/ still holds \(leftovers.joined(separator: ", "))")
        }
        if !evidence.rejectedAfterNextLaunch.isEmpty {
            problems.append("rejected/ holds \(evidence.rejectedAfterNextLaunch.joined(separator: ", "))")
        }
        if evidence.nextLaunch.termination != .exited(0) {
            problems.append("the next launch ended with \(evidence.nextLaunch.termination)")
        }
        if problems.isEmpty { return .pass(.pending, cell) }
        return .fail(.pending, cell, problems.joined(separator: "; "))
    }
}
