import AftermathNextLaunch
import AftermathOTLP
import AftermathOTLPHTTP
import HarnessSupport
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `aftermath-bench export`: the size of one crash's batch on the wire (protobuf and JSON,
/// plain and gzip) for a stack overflow (a child recursing until its stack runs out) and a
/// 64-frame crash, and what gzip costs; then, against the scripted collector of the tests, the
/// memory a 256 MiB response body adds and how long a collector that never answers holds one
/// export (default settings).
enum ExportBench {
    static func run(_ args: [String]) {
        let runs = args.firstIndex(of: "--runs").flatMap { Int(args[$0 + 1]) } ?? 20
        let root = NSTemporaryDirectory() + "aftermath-bench-export-\(getpid())"
        defer { try? FileManager.default.removeItem(atPath: root) }
        print("One crash's batch on the wire (gzip: zlib level 6), gzip time median of \(runs)")
        print("crash                       frames   protobuf  gzip      ratio  gzip time   JSON      gzip")
        for (name, depth) in [("stack overflow", 10_000_000), ("depth 64", 64)] {
            let dir = "\(root)/\(depth)"
            _ = benchChild(
                ["crash-child", "--depth", "\(depth)", "--dir", dir], environment: ["SWIFT_BACKTRACE": "enable=no"])
            let collection = ReportCollector(directory: ReportDirectory(root: dir)).collect(moveRejected: false)
            guard let report = collection.reports.first else {
                print("\(name): no crash report")
                continue
            }
            let batch = LogBatch(
                resource: SDK.resource(serviceName: "bench", serviceVersion: "1.0"), scopeName: SDK.scopeName,
                scopeVersion: SDK.version, records: [report.record])
            let protobuf = OTLPProtobuf.encode(batch), json = OTLPJSON.encode(batch)
            var times: [Double] = []
            var zipped: [UInt8] = []
            for _ in 0..<runs {
                let start = Monotonic.nanoseconds()
                zipped = HTTPClient.gzip(protobuf) ?? []
                times.append(Double(Monotonic.nanoseconds() - start) / 1e6)
            }
            let zippedJSON = HTTPClient.gzip(json) ?? []
            print(
                name.padding(toLength: 26, withPad: " ", startingAt: 0)
                    + String(
                        format: " %7d  %7d B  %6d B  %4.1fx  %6.2f ms  %7d B  %6d B",
                        report.crash?.frames.count ?? 0, protobuf.count, zipped.count,
                        Double(protobuf.count) / Double(max(1, zipped.count)), Stats.median(times), json.count,
                        zippedJSON.count))
        }
        network()
    }

    /// Peak resident memory (VmHWM) in KiB.
    static func peakKiB() -> Int {
        let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") } ?? ""
        return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
    }

    /// Starts Tests/tools/otlp_collector.py answering answer; returns it and its port.
    static func collector(_ answer: String, out: String) -> (Process, Int)? {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Tests/tools/otlp_collector.py").path
        try? FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", script, out, answer]
        let pipe = Pipe()
        process.standardOutput = pipe
        guard (try? process.run()) != nil else { return nil }
        var data = Data()
        while !data.contains(UInt8(ascii: "\n")) {
            let chunk = pipe.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            data += chunk
        }
        let line = String(decoding: data, as: UTF8.self)
        guard let port = Int(line.split(separator: " ").last?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "")
        else { return nil }
        return (process, port)
    }

    static func network() {
        let batch = LogBatch(
            resource: Resource(), scopeName: SDK.scopeName, scopeVersion: SDK.version,
            records: [LogRecord(timeUnixNano: 1, body: "bench")])
        let out = NSTemporaryDirectory() + "aftermath-bench-collector-\(getpid())"
        defer { try? FileManager.default.removeItem(atPath: out) }
        for answer in ["hugestream", "silent"] {
            guard let (process, port) = collector(answer, out: out + "/" + answer) else {
                print("the collector (python3 Tests/tools/otlp_collector.py) did not start")
                return
            }
            defer {
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
            }
            let exporter = OTLPHTTPExporter(endpoint: URL(string: "http://127.0.0.1:\(port)/v1/logs")!)
            let before = peakKiB()
            let start = Monotonic.nanoseconds()
            let result: String
            do {
                try exporter.export(batch)
                result = "delivered"
            } catch { result = "\(error)" }
            let seconds = Double(Monotonic.nanoseconds() - start) / 1e9
            if answer == "hugestream" {
                print(
                    String(
                        format: "256 MiB response body: peak memory +%.1f MiB, %.2f s (%@)",
                        Double(peakKiB() - before) / 1024, seconds, result))
            } else {
                print(
                    String(
                        format: "collector that never answers: one export held %.2f s (timeout 10 s, 3 attempts): %@",
                        seconds, result))
            }
        }
    }
}
