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
/// 64-frame crash, and what gzip costs.
enum ExportBench {
    static func run(_ args: [String]) {
        let runs = args.firstIndex(of: "--runs").flatMap { Int(args[$0 + 1]) } ?? 20
        let root = NSTemporaryDirectory() + "aftermath-bench-export-\(getpid())"
        defer { try? FileManager.default.removeItem(atPath: root) }
        print("One crash's batch on the wire (gzip: zlib level 6), gzip time median of \(runs)")
        print("crash                       frames   protobuf  gzip      ratio  gzip time   JSON      gzip")
        for (name, depth) in [("stack overflow", 10_000_000), ("depth 64", 64)] {
            let dir = "\(root)/\(depth)"
            guard let child = BenchChild.spawn(["crash-child", "--depth", "\(depth)", "--dir", dir],
                                               environment: ["SWIFT_BACKTRACE": "enable=no"]) else { continue }
            _ = child.readValues()
            _ = child.wait()
            let collection = ReportCollector(directory: ReportDirectory(root: dir)).collect(moveRejected: false)
            guard let report = collection.reports.first else { print("\(name): no crash report"); continue }
            let batch = LogBatch(resource: SDK.resource(serviceName: "bench", serviceVersion: "1.0"), scopeName: SDK.scopeName,
                                 scopeVersion: SDK.version, records: [report.record])
            let protobuf = OTLPProtobuf.encode(batch), json = OTLPJSON.encode(batch)
            var times: [Double] = []
            var zipped: [UInt8] = []
            for _ in 0..<runs {
                let start = Stats.monotonicNanoseconds()
                zipped = HTTPClient.gzip(protobuf) ?? []
                times.append(Double(Stats.monotonicNanoseconds() - start) / 1e6)
            }
            let zippedJSON = HTTPClient.gzip(json) ?? []
            print(name.padding(toLength: 26, withPad: " ", startingAt: 0) + String(format: " %7d  %7d B  %6d B  %4.1fx  %6.2f ms  %7d B  %6d B",
                         report.crash?.frames.count ?? 0, protobuf.count, zipped.count,
                         Double(protobuf.count) / Double(max(1, zipped.count)), Stats.median(times), json.count, zippedJSON.count))
        }
    }
}
