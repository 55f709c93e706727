import Aftermath
import AftermathNextLaunch
import AftermathOTLP
import AftermathTesting
import CHarnessFaults
import HarnessSupport
import Foundation

/// `aftermath-bench error [--calls N]`: the cost of Aftermath.record(error:fingerprint:) in a
/// loop (each call writes its file before returning), and of delivering what it wrote.
enum ErrorBench {
    struct BenchError: Error, CustomStringConvertible {
        var index: Int
        var description: String { "request \(index) failed: upstream timed out" }
    }

    /// Records the error depth frames down. Each frame passes the address of its own local
    /// down and uses it after the call, so the optimizer can neither specialize the recursion
    /// into a loop nor drop the frames (a closure parameter here got closure-specialized and
    /// flattened at -O, leaving no frames to walk).
    @inline(never)
    static func deepRecord(_ depth: Int, _ index: Int, _ sink: UnsafeMutablePointer<Int>) -> Int {
        var local = depth
        let written: Int
        if depth == 0 {
            written = Aftermath.record(error: BenchError(index: index), fingerprint: "bench") ? 1 : 0
        } else {
            written = deepRecord(depth - 1, index, &local)
        }
        sink.pointee &+= local
        return written
    }

    static func run(_ args: [String]) {
        var calls = 5000
        if let i = args.firstIndex(of: "--calls"), i + 1 < args.count, let n = Int(args[i + 1]) { calls = n }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("aftermath-error-bench-\(getpid())")
            .path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let exporter = InMemoryExporter()
        var config = Aftermath.Configuration(
            serviceName: "error-bench", serviceVersion: "1.0", exporter: exporter,
            reportsDirectory: dir, fsyncReports: false,
            deliverPendingReportsSynchronously: true)
        config.hangHeartbeat = .off
        config.maxPendingErrors = calls + 10
        do { try Aftermath.start(config) } catch {
            print("start failed: \(error)")
            exit(1)
        }

        // Warm-up: first walk, first file.
        for i in 0..<20 { Aftermath.record(error: BenchError(index: i)) }
        _ = Aftermath.deliverPendingReports()

        for depth in [0, 30] {
            var times: [Double] = []
            times.reserveCapacity(calls)
            var written = 0
            let total = Date()
            for i in 0..<calls {
                let t0 = DispatchTime.now().uptimeNanoseconds
                var sink = 0
                written += deepRecord(depth, i, &sink)
                times.append(Double(DispatchTime.now().uptimeNanoseconds - t0) / 1000)
            }
            let elapsed = Date().timeIntervalSince(total)
            times.sort()
            let files =
                (try? FileManager.default.contentsOfDirectory(atPath: dir + "/errors"))?.filter {
                    $0.hasSuffix(".error")
                } ?? []
            let size =
                files.first.flatMap {
                    try? FileManager.default.attributesOfItem(atPath: dir + "/errors/" + $0)[.size] as? Int
                } ?? 0
            print(
                String(
                    format:
                        "record(error:) stack depth +%d: %d calls, %d written, %.0f calls/s, median %.1f µs, p99 %.1f µs, max %.1f µs, file %d bytes",
                    depth, calls, written, Double(calls) / elapsed, times[calls / 2], times[calls * 99 / 100],
                    times.last ?? 0, size))
            let t0 = Date()
            let delivery = Aftermath.deliverPendingReports()
            let d = Date().timeIntervalSince(t0)
            let stack = exporter.records.last?[attribute: "exception.stacktrace"]?.stringValue ?? ""
            print("  frames per error: \(stack.split(separator: "\n").count)")
            print(
                String(
                    format: "  delivery of %d records: %.1f ms (%.1f µs per record)",
                    delivery?.exported ?? 0, d * 1000, d * 1e6 / Double(max(1, delivery?.exported ?? 1))))
        }
    }
}
