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
        return LogBatch(
            resource: SDK.resource(serviceName: "http-test", serviceVersion: "3.1"),
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

    @Test("400 is final: not retried, refused for good; 404 keeps the reports, not retried")
    func permanentAnswers() throws {
        let rejected = try Collector("400")
        #expect(throws: ExportError.self) { try OTLPHTTPExporter(endpoint: rejected.endpoint).export(try Self.batch()) }
        #expect(rejected.requests == 1)
        let missing = try Collector("200")
        let wrongPath = URL(string: "http://127.0.0.1:\(missing.port)/v1/nothing")!
        #expect(throws: ExportError.self) { try OTLPHTTPExporter(endpoint: wrongPath).export(try Self.batch()) }
        #expect(missing.requests == 1)
    }

    @Test("No collector at all: throws after the attempts")
    func unreachable() throws {
        let exporter = OTLPHTTPExporter(
            endpoint: URL(string: "http://127.0.0.1:9/v1/logs")!, maxAttempts: 2, maxRetryDelay: .milliseconds(100))
        #expect(throws: ExportError.self) { try exporter.export(try Self.batch()) }
    }

    @Test("Through the collector: files stay while the collector is down, go once it accepts")
    func deliveryKeepsFilesUntilAccepted() throws {
        let dir = try TestSupport.reportsDirectory()
        try TestSupport.write(try TestSupport.fixture("v1/sigsegv-null-depth12.crash"), to: dir.crashes + "/a.crash")
        let down = try Collector("503:0")
        let refused = ReportCollector(directory: dir).deliver(
            to: OTLPHTTPExporter(endpoint: down.endpoint, maxAttempts: 2),
            resource: Resource())
        #expect(refused.exported == 0 && refused.exportError != nil)
        #expect(FileManager.default.fileExists(atPath: dir.crashes + "/a.crash"))
        let up = try Collector("200")
        let accepted = ReportCollector(directory: dir).deliver(
            to: OTLPHTTPExporter(endpoint: up.endpoint), resource: Resource())
        #expect(accepted.exported == 1)
        #expect(!FileManager.default.fileExists(atPath: dir.crashes + "/a.crash"))
    }

    #if compiler(>=6.2)  // exit tests (#expect(processExitsWith:)) need Swift 6.2
    @Test("A response cut off inside its headers: an error, never a crash (in a child process)")
    func cutMidHeaders() async throws {
        let collector = try Collector("cut")
        await #expect(processExitsWith: .success) { [port = collector.port as Int] in
            let exporter = OTLPHTTPExporter(endpoint: URL(string: "http://127.0.0.1:\(port)/v1/logs")!)
            do { try exporter.export(try OTLPHTTPExporterTests.batch()) } catch { exit(0) }
            exit(3)  // delivered: wrong
        }
        #expect(collector.requests >= 1)
    }
    #endif

    @Test("A 200 whose body is cut off: not taken as delivered")
    func cutBody() throws {
        let collector = try Collector("cutbody")
        #expect(throws: ExportError.self) {
            try OTLPHTTPExporter(endpoint: collector.endpoint).export(try Self.batch())
        }
    }

    @Test(
        "301, 302, 303: never turned into a GET; the export fails and the reports are kept", arguments: [301, 302, 303])
    func redirectsThatWouldBecomeGET(code: Int) throws {
        let collector = try Collector("\(code)>/v2/logs,200")
        #expect(throws: ExportError.self) {
            try OTLPHTTPExporter(endpoint: collector.endpoint).export(try Self.batch())
        }
        for n in 0..<collector.requests { #expect(collector.text(n, "method") == "POST") }
    }

    @Test("307, 308: the POST is repeated at the new location with the same body", arguments: [307, 308])
    func redirectsThatKeepThePOST(code: Int) throws {
        let collector = try Collector("\(code)>/v2/logs,200")
        try OTLPHTTPExporter(endpoint: collector.endpoint, headers: ["Authorization": "Bearer secret"]).export(
            try Self.batch())
        #expect(collector.requests == 2)
        #expect(collector.text(1, "method") == "POST")
        #expect(collector.text(1, "path") == "/v2/logs")
        let first = try #require(collector.bytes(0, "body"))
        #expect(!first.isEmpty)
        #expect(collector.bytes(1, "body") == first)
        #expect(collector.headers(1)["authorization"] == "Bearer secret")  // same origin
    }

    @Test("A redirect to another origin: no Authorization nor any configured header goes there")
    func crossOriginRedirect() throws {
        let collector = try Collector("307>http://localhost:{port}/v1/logs,401")
        let exporter = OTLPHTTPExporter(
            endpoint: collector.endpoint,
            headers: ["Authorization": "Bearer secret", "X-Tenant": "shop"])
        #expect(throws: ExportError.self) { try exporter.export(try Self.batch()) }
        #expect(collector.headers(0)["authorization"] == "Bearer secret")
        #expect(collector.headers(0)["x-tenant"] == "shop")
        #expect(collector.requests == 2)
        #expect(collector.headers(1)["host"]?.hasPrefix("localhost") == true)
        #expect(collector.headers(1)["authorization"] == nil)
        #expect(collector.headers(1)["x-tenant"] == nil)
    }

    @Test(
        "A 256 MiB response body is not read past 4 MiB (with and without Content-Length)",
        arguments: ["huge", "hugestream"])
    func hugeBody(answer: String) throws {
        let collector = try Collector(answer)
        try OTLPHTTPExporter(endpoint: collector.endpoint).export(try Self.batch())
        let sent = try #require(collector.await(0, "sent").flatMap { Int($0) })
        #expect(sent < 32 << 20, "the client read \(sent) bytes")
    }

    @Test("A collector that never answers holds one export no longer than the timeout, retries included")
    func silentCollector() throws {
        let collector = try Collector("silent")
        let start = Date()
        #expect(throws: ExportError.self) {
            try OTLPHTTPExporter(endpoint: collector.endpoint, timeout: .seconds(1), maxAttempts: 3).export(
                try Self.batch())
        }
        let elapsed = Date().timeIntervalSince(start)
        #expect(elapsed < 2, "took \(elapsed) s")
    }

    @Test("400 with a message: not retried, the export throws with the collector's message")
    func badRequestMessage() throws {
        let collector = try Collector("400=record 3 has no body")
        #expect {
            try OTLPHTTPExporter(endpoint: collector.endpoint).export(try Self.batch())
        } throws: { error in
            (error as? ExportError)?.kind == .rejectedByCollector("record 3 has no body")
        }
        #expect(collector.requests == 1)
    }

    @Test("Delivery: a 400 keeps the report in rejected/ with the collector's message")
    func deliveryKeepsRejectedReport() throws {
        let dir = try TestSupport.reportsDirectory()
        try TestSupport.write(try TestSupport.fixture("v1/sigsegv-null-depth12.crash"), to: dir.crashes + "/a.crash")
        let collector = try Collector("400=record 0 is too old")
        let delivery = ReportCollector(directory: dir).deliver(
            to: OTLPHTTPExporter(endpoint: collector.endpoint), resource: Resource())
        #expect(delivery.exported == 0)
        #expect(collector.requests == 1)
        #expect(!FileManager.default.fileExists(atPath: dir.crashes + "/a.crash"))
        #expect(FileManager.default.fileExists(atPath: dir.rejected + "/a.crash"))
        let reason = try String(contentsOfFile: dir.rejected + "/a.crash.reason", encoding: .utf8)
        #expect(reason.contains("record 0 is too old"))
        // What the debug command lists.
        let listed = ReportCollector(directory: dir).rejectedFiles()
        #expect(
            listed.count == 1 && listed.first?.reason.contains("refused by the collector: record 0 is too old") == true)
    }

    @Test("Delivery stops after a batch that timed out: later batches wait for the next attempt")
    func deliveryStopsAfterTimeout() throws {
        let dir = try TestSupport.reportsDirectory()
        let crash = try TestSupport.fixture("v1/sigsegv-null-depth12.crash")
        for n in 0..<(ReportCollector.batchSize + 1) { try TestSupport.write(crash, to: dir.crashes + "/\(n).crash") }
        let collector = try Collector("silent")
        let start = Date()
        let delivery = ReportCollector(directory: dir).deliver(
            to: OTLPHTTPExporter(endpoint: collector.endpoint, timeout: .seconds(1)),
            resource: Resource())
        let elapsed = Date().timeIntervalSince(start)
        #expect(delivery.exported == 0 && delivery.exportError != nil)
        #expect(collector.requests == 1)
        #expect(elapsed < 2.5, "took \(elapsed) s")
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.crashes).count == ReportCollector.batchSize + 1)
    }

    #if compiler(>=6.2)  // exit tests (#expect(processExitsWith:)) need Swift 6.2
    @Test(
        "A collector that resets the connection while a large body is sent: an error, no SIGPIPE (in a child process)")
    func resetWhileSending() async throws {
        let collector = try Collector("reset")
        await #expect(processExitsWith: .success) { [port = collector.port as Int] in
            var batch = try OTLPHTTPExporterTests.batch()
            batch.records = Array(repeating: batch.records[0], count: 400)
            let exporter = OTLPHTTPExporter(endpoint: URL(string: "http://127.0.0.1:\(port)/v1/logs")!, maxAttempts: 2)
            do { try exporter.export(batch) } catch { exit(0) }
            exit(3)
        }
        #expect(collector.requests >= 1)
    }

    @Test("Garbage instead of a response, and headers without end: errors, never a crash (in a child process)")
    func garbageAndHeaderFlood() async throws {
        let garbage = try Collector("garbage"), flood = try Collector("headerflood")
        await #expect(processExitsWith: .success) { [ports = [garbage.port, flood.port] as [Int]] in
            for port in ports {
                let exporter = OTLPHTTPExporter(
                    endpoint: URL(string: "http://127.0.0.1:\(port)/v1/logs")!, timeout: .seconds(5), maxAttempts: 1)
                do {
                    try exporter.export(try OTLPHTTPExporterTests.batch())
                    exit(3)
                } catch {}
            }
            exit(0)
        }
        #expect(garbage.requests == 1 && flood.requests == 1)
    }
    #endif

    @Test("A header value with a line break is refused before anything is sent")
    func headerInjection() throws {
        let collector = try Collector("200")
        let exporter = OTLPHTTPExporter(endpoint: collector.endpoint, headers: ["X-Evil": "a\r\nX-Injected: 1"])
        #expect(throws: ExportError.self) { try exporter.export(try Self.batch()) }
        #expect(collector.requests == 0)
    }

    @Test("Errors never show a password the endpoint URL carries")
    func noPasswordInErrors() {
        let exporter = OTLPHTTPExporter(
            endpoint: URL(string: "http://user:s3cret@127.0.0.1:9/v1/logs")!, maxAttempts: 1)
        #expect { try exporter.export(try Self.batch()) } throws: { error in
            let text = String(describing: error)
            return text.contains("127.0.0.1:9") && !text.contains("s3cret")
        }
    }

    @Test("A redirect loop ends after 5 redirects, reports kept")
    func redirectLoop() throws {
        let collector = try Collector("307>/v1/logs")
        #expect(throws: ExportError.self) {
            try OTLPHTTPExporter(endpoint: collector.endpoint).export(try Self.batch())
        }
        #expect(collector.requests == 6)
    }

    @Test("The collector's message is bounded to 4 KiB and has no control characters")
    func hostileMessage() throws {
        let collector = try Collector("400=\u{1b}[31mred\u{7}" + String(repeating: "é", count: 3000))
        #expect {
            try OTLPHTTPExporter(endpoint: collector.endpoint).export(try Self.batch())
        } throws: { error in
            guard case .rejectedByCollector(let message)? = (error as? ExportError)?.kind else { return false }
            return message.hasPrefix("[31mred") && message.utf8.count <= 4096 && message.utf8.count > 4000
                && !message.unicodeScalars.contains { $0.value < 0x20 }
        }
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
