import Aftermath
import AftermathNextLaunch
import AftermathOTLP
import CSignalShim
import HarnessSupport
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A crash right after start, or while the process's own delivery exports what earlier
/// launches left, launch after launch over one reports directory and one outbox. However the
/// crash and the delivery thread interleave: no process exports a report of its own run, nor
/// starts an export once its crash has begun; an export in progress is acknowledged before
/// the process dies, or not at all; nothing unfinished is left in the outbox; every report is
/// exported exactly once in all.
enum DeliveryRace {
    /// Launches that crash: every other one at once after start, having recorded
    /// ``errorsPerLaunch`` handled errors (`race-start`); the others while their delivery
    /// exports what the launches before them left (`race-export`, `race-ack`, in turn). Fewer
    /// than the pending limit (64), so that none is rejected for the count whatever the
    /// crashing launches did not deliver.
    static let launches = 60
    /// Handled errors each `race-start` launch leaves: enough that the later deliveries have
    /// more than one batch (50 records) to export.
    static let errorsPerLaunch = 3

    /// Set by the exporter when it is handed its first batch.
    static let exporting = Atomic<Bool>(false)

    /// Tells the main thread to crash when it is handed its first batch, and goes on only once
    /// the crash handler has begun: the crash is written while this export runs. Then it hands
    /// the batch to the FileExporter (`race-export`); or (`race-ack`), as a receiver that has
    /// stored the batch when the crash begins and answers 20 ms later, writes the batch (encoded
    /// beforehand) to the outbox itself at once and returns 20 ms later: an export in progress,
    /// acknowledged after the crash began. A batch handed to it once the crash has begun says so
    /// (`LATE-HANDOFF`).
    struct CrashingExporter: LogExporter {
        let base: FileExporter
        let acknowledgesLate: Bool
        func export(_ batch: LogBatch) throws {
            if aft_crash_in_progress() != 0 { ExitChild.say("LATE-HANDOFF") }
            let bytes = acknowledgesLate ? OTLPJSON.encode(batch) : []
            DeliveryRace.exporting.store(true, ordering: .sequentiallyConsistent)
            let deadline = Monotonic.seconds() + 2
            while aft_crash_in_progress() == 0, Monotonic.seconds() < deadline { sched_yield() }
            guard acknowledgesLate else { return try base.export(batch) }
            let name = "\(Clock.realtimeNanoseconds())-\(UUID().uuidString).json"
            let fd = open(base.directory + "/" + name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            guard fd >= 0 else { throw ExportError("cannot create \(name)", code: errno) }
            let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            close(fd)
            guard written == bytes.count else { throw ExportError("cannot write \(name)") }
            usleep(20_000)
        }
    }

    /// The app side: `exit-harness child race-start|race-export|race-ack|race-report <dir>
    /// <outbox>`.
    static func child(_ args: [String]) -> Never {
        let mode = args[0], dir = args[1], file = FileExporter(directory: args[2])
        var config = Aftermath.Configuration(
            serviceName: "exit-harness", serviceVersion: "1.0",
            exporter: ["race-export", "race-ack"].contains(mode)
                ? CrashingExporter(base: file, acknowledgesLate: mode == "race-ack") : file,
            reportsDirectory: dir, fsyncReports: false, deliverPendingReportsSynchronously: mode == "race-report")
        config.hangHeartbeat = .off
        if mode == "race-export" {
            // The app's own SIGSEGV handler, chained after Aftermath's: it takes 100 ms before
            // the process dies (as one that flushes logs does), time enough for the delivery
            // thread to finish whatever it does meanwhile.
            signal(SIGSEGV) { _ in
                usleep(100_000)
                signal(SIGSEGV, SIG_DFL)
            }
        }
        do { try Aftermath.start(config) } catch {
            ExitChild.say("START-FAILED \(error)")
            exit(3)
        }
        ExitChild.say("READY \(Aftermath.sessionID?.uuidString.lowercased() ?? "-")")
        switch mode {
        case "race-report": exit(0)
        case "race-start":
            for code in 0..<errorsPerLaunch { Aftermath.record(error: ExitChild.HarnessError(code: code)) }
        default:
            let deadline = Monotonic.seconds() + 2
            while !exporting.load(ordering: .sequentiallyConsistent), Monotonic.seconds() < deadline { usleep(1000) }
        }
        UnsafeMutablePointer<Int>(bitPattern: 8)!.pointee = 1
        exit(0)
    }

    /// A record in the outbox: its event (`error` for a handled error), `log.record.uid`,
    /// session, and the pid of the process that exported it.
    struct Exported {
        var event: String
        var uid: String
        var session: String
        var exporter: Int64
    }

    /// The outbox's records, and the names that are not finished files.
    static func outbox(_ path: String) -> (records: [Exported], unfinished: [String]) {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
        var records: [Exported] = []
        var unfinished: [String] = []
        for name in names.sorted() where !name.hasSuffix(".dmp") || name.hasPrefix(".") {
            guard name.hasSuffix(".json"), !name.hasPrefix("."),
                let data = FileManager.default.contents(atPath: (path as NSString).appendingPathComponent(name)),
                let batches = try? OTLPJSON.decodeBatches(Array(data))
            else {
                unfinished.append(name)
                continue
            }
            for batch in batches {
                let pid = batch.resource.attributes.first { $0.key == "process.pid" }?.value.intValue ?? -1
                for r in batch.records {
                    records.append(
                        Exported(
                            event: r.eventName ?? (r[text: "exception.type"] == nil ? "-" : "error"),
                            uid: r[text: "log.record.uid"] ?? "-",
                            session: r[text: "session.id"] ?? "-", exporter: pid))
                }
            }
        }
        return (records, unfinished)
    }

    static func row() -> (got: String, ok: Bool?) {
        let dir = ExitScenarios.tempDir("race"), box = ExitScenarios.tempDir("race-outbox")
        var sessions: [Int64: String] = [:]
        var crashingExporters: Set<Int64> = []
        var modes: [Int64: String] = [:]  // each launch's mode, by pid: to tell who sent a record twice
        var deaths = 0, lateHandoffs = 0
        for i in 0..<launches {
            let mode = i % 2 == 0 ? "race-start" : i % 4 == 1 ? "race-export" : "race-ack"
            guard let c = ExitScenarios.child([mode, dir, box]) else { return ("spawn failed", false) }
            let ready = c.waitForLine("READY")
            let result = c.finish()
            if result.termination == .signaled(SIGSEGV) { deaths += 1 }
            lateHandoffs += result.lines.filter { $0 == "LATE-HANDOFF" }.count
            if let session = ready?.split(separator: " ").last { sessions[Int64(c.pid)] = String(session) }
            if mode == "race-export" { crashingExporters.insert(Int64(c.pid)) }
            modes[Int64(c.pid)] = "\(mode) #\(i)"
        }
        guard let last = ExitScenarios.child(["race-report", dir, box]) else { return ("spawn failed", false) }
        let lastStatus = last.finish().termination
        let (records, unfinished) = outbox(box)
        let crashes = records.filter { $0.event == "app.crash" }
        let errors = records.filter { $0.event == "error" }.count
        var crashesOf: [String: Int] = [:]
        for crash in crashes { crashesOf[crash.session, default: 0] += 1 }
        var uids: [String: Int] = [:]
        for r in records { uids[r.uid, default: 0] += 1 }
        let own = crashes.filter { sessions[$0.exporter] == $0.session }.count
        // A race-export child hands its batches to the FileExporter only after its crash began.
        let whileCrashing = records.filter { crashingExporters.contains($0.exporter) }.count
        let missing = sessions.values.filter { crashesOf[$0] == nil }.count
        let twice = uids.values.filter { $0 > 1 }.count
        // A record sent twice: its event, whose run it was and who sent it each time.
        let twiceDetail = uids.filter { $0.value > 1 }.keys.sorted().prefix(2).map { uid in
            let sends = records.filter { $0.uid == uid }
            let run = sessions.first { $0.value == sends.first?.session }.map { modes[$0.key] ?? "?" } ?? "?"
            let by = sends.map { modes[$0.exporter] ?? (sessions[$0.exporter] == nil ? "the last launch" : "?") }
            return "\(sends.first?.event ?? "-") of \(run) sent by \(by.joined(separator: " and "))"
        }
        func files(_ sub: String) -> [String] {
            ((try? FileManager.default.contentsOfDirectory(atPath: dir + "/" + sub)) ?? []).filter {
                !$0.hasSuffix(".reason")
            }
        }
        let pending = files("crashes").filter { FileHeader.holdsCrashReport(dir + "/crashes/" + $0) } + files("errors")
        let rejected = files("rejected")
        let wantErrors = (launches + 1) / 2 * errorsPerLaunch
        let got =
            "\(deaths)/\(launches) SIGSEGV, then \(lastStatus); \(crashes.count) app.crash, \(errors) errors: "
            + "\(own) crash by its own process, \(whileCrashing) written by a crashing process's FileExporter, "
            + "\(lateHandoffs) late hand-offs, \(twice) twice"
            + (twiceDetail.isEmpty ? "" : " (\(twiceDetail.joined(separator: "; ")))")
            + ", \(missing) missing; \(unfinished.count) unfinished "
            + "in the outbox" + (unfinished.first.map { " (\($0))" } ?? "")
            + "; \(pending.count) pending, \(rejected.count) rejected"
            + (rejected.first.map { name in
                let reason = try? String(contentsOfFile: dir + "/rejected/" + name + ".reason", encoding: .utf8)
                return " (\(name): \(reason ?? "no reason"))"
            } ?? "")
        let ok =
            deaths == launches && lastStatus == .exited(0) && sessions.count == launches && errors == wantErrors
            && own == 0 && whileCrashing == 0 && lateHandoffs == 0 && twice == 0 && missing == 0
            && unfinished.isEmpty && pending.isEmpty && rejected.isEmpty
        return (got, ok)
    }
}
