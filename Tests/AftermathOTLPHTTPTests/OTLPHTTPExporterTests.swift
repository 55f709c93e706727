import Foundation
import Testing
import AftermathOTLPHTTP
import AftermathOTLP
import AftermathNextLaunch
import TestSupport

/// The OTLP/HTTP exporter against a scripted collector on 127.0.0.1 (Tests/tools/otlp_collector.py,
/// which parses protobuf bodies with the official opentelemetry-proto definitions).
@Suite("OTLP/HTTP exporter", .serialized)
struct OTLPHTTPExporterTests {
    /// A collector process answering successive POSTs as scripted.
    final class Collector {
        let process = Process()
        let out: String
        let port: Int

        init(_ responses: String) throws {
            out = FileManager.default.temporaryDirectory.appendingPathComponent("otlp-collector-\(UUID())").path
            try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
            let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .appendingPathComponent("tools/otlp_collector.py").path
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["python3", script, out, responses]
            let pipe = Pipe()
            process.standardOutput = pipe
            try process.run()
            var line = Data()
            while !line.contains(UInt8(ascii: "\n")) {
                let chunk = pipe.fileHandleForReading.availableData
                if chunk.isEmpty { break }
                line += chunk
            }
            let text = String(decoding: line, as: UTF8.self)
            guard let port = text.split(separator: " ").last.flatMap({ Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }) else {
                throw ExportError("collector did not start: \(text)")
            }
            self.port = port
        }

        var endpoint: URL { URL(string: "http://127.0.0.1:\(port)/v1/logs")! }
        var requests: Int { ((try? FileManager.default.contentsOfDirectory(atPath: out)) ?? []).filter { $0.hasSuffix(".body") }.count }
        func text(_ n: Int, _ suffix: String) -> String? { try? String(contentsOfFile: "\(out)/\(n).\(suffix)", encoding: .utf8) }

        deinit {
            // SIGKILL: the test runner's threads block SIGTERM, and the child inherits the mask.
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            try? FileManager.default.removeItem(atPath: out)
        }
    }

    /// A real crash's record, with every kind of attribute value the SDK sends.
    static func batch() throws -> LogBatch {
        let crash = try ReportFile.decode(TestSupport.fixture("v1/sigsegv-null-depth12.crash")).crashReport()
        var record = RecordMapper.crash(crash, observedTimeUnixNano: 1_800_000_000_123_456_789)
        record.attributes += [
            Attribute("zero", .int(0)), Attribute("negative", .int(-42)), Attribute("off", .bool(false)),
            Attribute("ratio", .double(0.25)), Attribute("list", .array(["a", 7, true])),
            Attribute("map", .kvlist([Attribute("k", "v")])), Attribute("raw", .bytes([0, 1, 255])),
            Attribute("empty", ""),
        ]
        return LogBatch(resource: SDK.resource(serviceName: "http-test", serviceVersion: "3.1"),
                        scopeName: SDK.scopeName, scopeVersion: SDK.version, records: [record])
    }

    @Test("Protobuf (the default): the official definitions parse it back to the same records")
    func protobufRoundTrip() throws {
        let collector = try Collector("200")
        let batch = try Self.batch()
        try OTLPHTTPExporter(endpoint: collector.endpoint).export(batch)
        #expect(collector.requests == 1)
        #expect(collector.text(0, "type") == "application/x-protobuf")
        #expect(collector.text(0, "error") == nil)
        let json = try #require(collector.text(0, "json"))
        #expect(try OTLPJSON.decode(Array(json.utf8)) == batch)
    }

    @Test("JSON: the body is the OTLP/JSON request")
    func json() throws {
        let collector = try Collector("200")
        let batch = try Self.batch()
        try OTLPHTTPExporter(endpoint: collector.endpoint, encoding: .json).export(batch)
        #expect(collector.text(0, "type") == "application/json")
        let body = try #require(collector.text(0, "body"))
        #expect(try OTLPJSON.decode(Array(body.utf8)) == batch)
    }

    @Test("503 then 200: retried, delivered")
    func retryThenSuccess() throws {
        let collector = try Collector("503:0,200")
        try OTLPHTTPExporter(endpoint: collector.endpoint).export(try Self.batch())
        #expect(collector.requests == 2)
    }

    @Test("429 with Retry-After: the exporter waits that long before retrying")
    func retryAfter() throws {
        let collector = try Collector("429:1,200")
        let start = Date()
        try OTLPHTTPExporter(endpoint: collector.endpoint).export(try Self.batch())
        #expect(collector.requests == 2)
        #expect(Date().timeIntervalSince(start) >= 0.9)
    }

    @Test("Still unavailable after every attempt: throws, so the reports are kept")
    func exhausted() throws {
        let collector = try Collector("503:0")
        #expect(throws: ExportError.self) {
            try OTLPHTTPExporter(endpoint: collector.endpoint, maxAttempts: 3).export(try Self.batch())
        }
        #expect(collector.requests == 3)
    }

    @Test("400 is final: not retried, counted as delivered; 404 keeps the reports, not retried")
    func permanentAnswers() throws {
        let rejected = try Collector("400")
        try OTLPHTTPExporter(endpoint: rejected.endpoint).export(try Self.batch())
        #expect(rejected.requests == 1)
        let missing = try Collector("200")
        let wrongPath = URL(string: "http://127.0.0.1:\(missing.port)/v1/nothing")!
        #expect(throws: ExportError.self) { try OTLPHTTPExporter(endpoint: wrongPath).export(try Self.batch()) }
        #expect(missing.requests == 1)
    }

    @Test("No collector at all: throws after the attempts")
    func unreachable() throws {
        let exporter = OTLPHTTPExporter(endpoint: URL(string: "http://127.0.0.1:9/v1/logs")!, maxAttempts: 2, maxRetryDelay: 0.1)
        #expect(throws: ExportError.self) { try exporter.export(try Self.batch()) }
    }

    @Test("Through the collector: files stay while the collector is down, go once it accepts")
    func deliveryKeepsFilesUntilAccepted() throws {
        let dir = try TestSupport.reportsDirectory()
        try TestSupport.write(try TestSupport.fixture("v1/sigsegv-null-depth12.crash"), to: dir.crashes + "/a.crash")
        let down = try Collector("503:0")
        let refused = ReportCollector(directory: dir).deliver(to: OTLPHTTPExporter(endpoint: down.endpoint, maxAttempts: 2),
                                                              resource: Resource())
        #expect(refused.exported == 0 && refused.exportError != nil)
        #expect(FileManager.default.fileExists(atPath: dir.crashes + "/a.crash"))
        let up = try Collector("200")
        let accepted = ReportCollector(directory: dir).deliver(to: OTLPHTTPExporter(endpoint: up.endpoint), resource: Resource())
        #expect(accepted.exported == 1)
        #expect(!FileManager.default.fileExists(atPath: dir.crashes + "/a.crash"))
    }

    @Test("Retry-After as seconds or as an HTTP date")
    func retryAfterParsing() {
        #expect(OTLPHTTPExporter.retryAfter("3") == 3)
        #expect(OTLPHTTPExporter.retryAfter(" 0 ") == 0)
        #expect(OTLPHTTPExporter.retryAfter(nil) == nil)
        #expect(OTLPHTTPExporter.retryAfter("soon") == nil)
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        let inTen = formatter.string(from: Date().addingTimeInterval(10))
        let parsed = OTLPHTTPExporter.retryAfter(inTen) ?? -1
        #expect(parsed > 7 && parsed <= 10)
    }
}
