import Aftermath
import AftermathNextLaunch
import AftermathOTLP
import AftermathTesting
import HarnessSupport
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `aftermath-bench store`: a launch with many pending files of one kind (crash, hang, run,
/// error; copies of the v1 fixtures). Each figure comes from a fresh child process:
/// - deliver: one delivery with the default limits (what a launch does in the background),
///   wall time and peak RSS growth;
/// - all: every file decoded, mapped and encoded (OTLP protobuf, batches of 50) with the
///   limits raised to the file count, nothing moved or deleted: the decoders' throughput;
/// - start: how long `Aftermath.start` holds the caller with those files pending.
enum StoreBench {
    static let kinds: [(kind: String, fixture: String, folder: String, suffix: String)] = [
        ("crash", "sigsegv-null-depth12.crash", "crashes", ".crash"),
        ("hang", "hang-unfinished-killed.hang", "hangs", ".hang"),
        ("run", "run-killed-during-hang.run", "runs", ".run"),
        ("error", "handled-error.error", "errors", ".error"),
    ]

    static func run(_ args: [String]) {
        let counts =
            args.firstIndex(of: "--counts").flatMap { i in
                args[i + 1].split(separator: ",").compactMap { Int($0) }
            } ?? [1_000, 10_000]
        let root = NSTemporaryDirectory() + "aftermath-store-bench-\(getpid())"
        defer { try? FileManager.default.removeItem(atPath: root) }
        print(
            "kind   files   deliver (default limits: read, send, delete) | all decoded+mapped+encoded (nothing deleted) | start holds"
        )
        for (kind, fixture, folder, suffix) in kinds {
            guard let bytes = FileManager.default.contents(atPath: fixturePath(fixture)).map(Array.init) else {
                print("\(kind): fixture \(fixture) not found")
                continue
            }
            for count in counts {
                var cells: [String] = []
                for mode in ["deliver", "all", "start"] {
                    let dir = "\(root)/\(kind)-\(count)-\(mode)"
                    let directory = ReportDirectory(root: dir)
                    do { try directory.prepare() } catch {
                        print("cannot prepare \(dir): \(error)")
                        return
                    }
                    let target = directory.path(folder)
                    for i in 0..<count {
                        _ = StoreFiles.createExclusive(target + "/" + String(format: "%032x", i) + suffix, bytes)
                    }
                    sync()  // the files on disk before the child runs: its figure is not the writeback's
                    let v = benchChild(
                        ["store-child", mode, dir, String(count)],
                        environment: ["SWIFT_BACKTRACE": "enable=no"]
                    ).values
                    try? FileManager.default.removeItem(atPath: dir)
                    guard v.count == 5 else {
                        cells.append("failed")
                        continue
                    }
                    let ms = String(format: "%.1f ms", Double(v[0]) / 1e6)
                    switch mode {
                    case "start": cells.append(ms)
                    default:
                        cells.append(
                            ms
                                + String(
                                    format: " (CPU %.1f ms), +%.1f MiB RSS, ", Double(v[4]) / 1e6, Double(v[1]) / 1024)
                                + "\(v[2]) sent, \(v[3]) rejected")
                    }
                }
                print(
                    "\(kind.padding(toLength: 6, withPad: " ", startingAt: 0)) \(String(count).padding(toLength: 7, withPad: " ", startingAt: 0)) "
                        + cells.joined(separator: " | "))
            }
        }
    }

    /// An exporter that encodes each batch as OTLP/HTTP would send it, and drops it.
    final class EncodingExporter: LogExporter, @unchecked Sendable {
        var bytes = 0
        func export(_ batch: LogBatch) throws { bytes += OTLPProtobuf.encode(batch).count }
    }

    /// Writes, on fd 3: elapsed ns, peak RSS growth (KiB), records exported, files rejected,
    /// CPU ns (user + system: the figure that holds on a busy machine).
    static func child(_ args: [String]) {
        guard args.count == 3, let count = Int(args[2]) else { exit(2) }
        let mode = args[0], dir = args[1]
        let before = peakRSSKiB()
        var values: [UInt64] = []
        switch mode {
        case "start":
            let config = Aftermath.Configuration(
                serviceName: "bench", serviceVersion: "1.0",
                exporter: EncodingExporter(), reportsDirectory: dir)
            let start = Monotonic.nanoseconds()
            do { try Aftermath.start(config) } catch { exit(3) }
            values = [Monotonic.nanoseconds() - start, 0, 0, 0, 0]
        case "deliver", "all":
            var limits = ReportCollector.Limits()
            if mode == "all" {
                limits.maxPendingCrashes = count
                limits.maxPendingHangs = count
                limits.maxPendingErrors = count
                limits.maxPendingRuns = count
            }
            let collector = ReportCollector(directory: ReportDirectory(root: dir), limits: limits)
            let exporter = EncodingExporter()
            let resource = SDK.resource(serviceName: "bench", serviceVersion: "1.0")
            let cpuBefore = cpuNanoseconds()
            let start = Monotonic.nanoseconds()
            let sent: Int, rejected: Int
            if mode == "deliver" {
                let delivery = collector.deliver(to: exporter, resource: resource)
                (sent, rejected) = (delivery.exported, delivery.rejected.count)
            } else {
                // Decoded, mapped and encoded; nothing moved or deleted (the disk's share apart).
                let collection = collector.collect(moveRejected: false)
                var i = 0
                while i < collection.reports.count {
                    let chunk = collection.reports[i..<min(i + ReportCollector.batchSize, collection.reports.count)]
                    try? exporter.export(
                        LogBatch(
                            resource: resource, scopeName: SDK.scopeName, scopeVersion: SDK.version,
                            records: chunk.map(\.record)))
                    i += chunk.count
                }
                (sent, rejected) = (collection.reports.count, collection.rejected.count)
            }
            let elapsed = Monotonic.nanoseconds() - start
            values = [
                elapsed, UInt64(max(0, peakRSSKiB() - before)), UInt64(sent), UInt64(rejected),
                cpuNanoseconds() - cpuBefore,
            ]
        default:
            exit(2)
        }
        for var v in values { _ = write(3, &v, 8) }
        exit(0)
    }

    /// User + system CPU time of this process.
    static func cpuNanoseconds() -> UInt64 {
        var usage = rusage()
        getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
        func ns(_ t: timeval) -> UInt64 { UInt64(t.tv_sec) * 1_000_000_000 + UInt64(t.tv_usec) * 1000 }
        return ns(usage.ru_utime) + ns(usage.ru_stime)
    }

    static func peakRSSKiB() -> Int {
        var usage = rusage()
        getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
        return usage.ru_maxrss
    }

    static func fixturePath(_ name: String) -> String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
            .appendingPathComponent("Tests/TestSupport/Fixtures/v1/\(name)").path
    }
}
