import AftermathOTLP
import Foundation

/// One entry of apsio.threads, as a backend reads it.
struct ThreadEntry: Decodable, Sendable {
    var id: UInt64
    var name: String
    var crashed: Bool
    var state: String
    var context: String
    var why: String?
    var stacktrace: String
    var alsoCrashedSignal: Int32?

    enum CodingKeys: String, CodingKey {
        case id, name, crashed, state, context, why, stacktrace
        case alsoCrashedSignal = "also_crashed_signal"
    }

    static func decodeList(_ json: String) throws -> [ThreadEntry] {
        try JSONDecoder().decode([ThreadEntry].self, from: Data(json.utf8))
    }
}

/// What a scenario's other threads must look like in the record.
struct ThreadExpectation: Sendable {
    /// A thread by name, with the function its stack must show, how its context was taken and
    /// why not in full.
    struct Worker: Sendable {
        var name: String
        var function: String?
        var context: String?
        var why: String?
        var state: String?
    }

    /// At least this many threads listed.
    var minimumThreads: Int
    var workers: [Worker]

    static func of(_ setup: Setup) -> ThreadExpectation {
        // The main thread, the hang watchdog and its pinger (which also updates the run record).
        let base = 3
        switch setup {
        case .namedWorkers:
            return ThreadExpectation(
                minimumThreads: base + 8,
                workers: (0..<8).map {
                    Worker(name: "worker-\($0)", function: "aft_test_worker_parked_\($0)", context: "signal")
                })
        case .seccompKillProcessVMReadv, .seccompRefuseProcessVMReadv:
            // No ptrace anywhere: the same threads as without the filter.
            return ThreadExpectation(
                minimumThreads: base + 4,
                workers: (0..<4).map {
                    Worker(name: "worker-\($0)", function: "aft_test_worker_parked_\($0)", context: "signal")
                })
        case .signalBlockingWorker:
            return ThreadExpectation(
                minimumThreads: base + 3,
                workers: [
                    Worker(
                        name: "blocker", function: "aft_test_worker_blocking_signals", context: "syscall",
                        why: "blocks_signal"),
                    Worker(name: "worker-0", function: "aft_test_worker_parked_0", context: "signal"),
                ])
        case .spinningWorker:
            return ThreadExpectation(
                minimumThreads: base + 3,
                workers: [
                    Worker(name: "spinner", function: "aft_test_worker_spinning", context: "signal", state: "R")
                ])
        case .tracedWorker:
            return ThreadExpectation(
                minimumThreads: base + 1,
                workers: [
                    Worker(
                        name: "traced", function: "aft_test_worker_traced", context: "syscall", why: "stopped",
                        state: "t")
                ])
        case .unansweringWorker:
            return ThreadExpectation(
                minimumThreads: base + 1,
                workers: [
                    Worker(name: "traced", function: "aft_test_worker_traced", context: "syscall", why: "no_answer")
                ])
        case .manyThreads:
            return ThreadExpectation(
                minimumThreads: 256,
                workers: [Worker(name: "worker-254", function: "aft_test_worker_parked_6", context: "signal")])
        case .secondCrasher:
            return ThreadExpectation(minimumThreads: base + 1, workers: [Worker(name: "crasher-2", context: "crash")])
        case .workerOverflowBeforeStart:
            return ThreadExpectation(
                minimumThreads: base + 1,
                workers: [Worker(name: "overflower", function: "aft_test_overflow", context: "crash")])
        default:
            return ThreadExpectation(minimumThreads: base, workers: [])
        }
    }
}

extension Checks {
    /// Every thread of the crashed process in apsio.threads: the crashed one first, each worker
    /// with its function, its context and why it has no full one.
    func threads() -> CheckResult {
        guard let record else { return .skip(.threads) }
        // Under ulimit -f 8 the report keeps its own thread and leaves the others out.
        if scenario.setup == .fileSizeLimit, record[attribute: "apsio.threads"] == nil { return .pass(.threads, "cut") }
        guard let json = record[attribute: "apsio.threads"]?.stringValue else {
            return .fail(.threads, "none", "no apsio.threads")
        }
        let list: [ThreadEntry]
        do { list = try ThreadEntry.decodeList(json) } catch {
            return .fail(.threads, "bad JSON", "apsio.threads does not parse: \(error)")
        }
        let expected = ThreadExpectation.of(scenario.setup)
        var problems: [String] = []
        if list.count < expected.minimumThreads {
            problems.append("\(list.count) threads listed, expected at least \(expected.minimumThreads)")
        }
        if let omitted = record[attribute: "apsio.threads.omitted"]?.intValue {
            problems.append("apsio.threads.omitted \(omitted)")
        }
        if list.first?.crashed != true { problems.append("the first entry is not the crashed thread") }
        if list.filter(\.crashed).count != 1 { problems.append("\(list.filter(\.crashed).count) crashed entries") }
        let crashedName = scenario.threadName ?? executableName.prefix(15).description
        if scenario.setup != .secondCrasher, let first = list.first, first.name != crashedName {
            problems.append("the crashed thread is '\(first.name)', expected '\(crashedName)'")
        }
        for entry in list where entry.context == "none" && entry.why == nil {
            problems.append("\(entry.name) (\(entry.id)) has no context and no reason")
        }
        for worker in expected.workers { problems += check(worker, in: list) }
        // However the threads behave, they hold the crash up for a bounded time.
        let held =
            (record[attribute: "apsio.threads.capture_ms"]?.doubleValue ?? 0)
            + (record[attribute: "apsio.threads.unwind_ms"]?.doubleValue ?? 0)
        if held > 150 { problems.append("the threads held the crash \(Int(held)) ms (limit 150)") }
        let cell = "\(list.count)" + (record[attribute: "apsio.threads.deadline_reached"] != nil ? " dl" : "")
        if problems.isEmpty { return .pass(.threads, cell) }
        return .fail(.threads, cell, problems.joined(separator: "; "))
    }

    private func check(_ worker: ThreadExpectation.Worker, in list: [ThreadEntry]) -> [String] {
        // A second crasher that won the race is the crashed thread itself.
        if scenario.setup == .secondCrasher, list.first?.name == worker.name { return [] }
        guard let entry = list.first(where: { $0.name == worker.name }) else { return ["no thread '\(worker.name)'"] }
        var problems: [String] = []
        // Two threads at once: the second is paused either inside its own fault (its crash's
        // context) or a moment before it (its own signal frame); both make one whole report.
        if scenario.setup == .secondCrasher, entry.context == "signal", entry.alsoCrashedSignal == nil { return [] }
        if let context = worker.context, entry.context != context {
            problems.append("\(worker.name): context \(entry.context), expected \(context)")
        }
        if entry.why != worker.why {
            problems.append("\(worker.name): why \(entry.why ?? "none"), expected \(worker.why ?? "none")")
        }
        if let state = worker.state, entry.state != state {
            problems.append("\(worker.name): state \(entry.state), expected \(state)")
        }
        if scenario.setup == .secondCrasher, entry.alsoCrashedSignal != SIGSEGV {
            problems.append("\(worker.name): also_crashed_signal \(entry.alsoCrashedSignal.map(String.init) ?? "none")")
        }
        let frames = symbolicate(entry.stacktrace)
        if frames.isEmpty { problems.append("\(worker.name): no frames") }
        if let function = worker.function, !frames.contains(where: { $0.symbol?.hasPrefix(function) == true }) {
            let shown = frames.prefix(6).map { $0.symbol ?? "?" }.joined(separator: " < ")
            problems.append("\(worker.name): \(function) not in its stack (\(shown))")
        }
        return problems
    }
}
