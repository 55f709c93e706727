import Foundation
import Testing
import AftermathNextLaunch
import TestSupport
import AftermathOTLP
import AftermathOTLPHTTP

/// The standard OpenTelemetry environment variables, against the scripted collector; what the
/// app sets in code wins.
@Suite("OTLP/HTTP exporter: OpenTelemetry environment", .serialized)
struct OTLPEnvironmentTests {
    typealias Collector = OTLPHTTPExporterTests.Collector

    static func exporter(
        _ env: [String: String], endpoint: URL? = nil, encoding: OTLPHTTPExporter.Encoding? = nil,
        headers: [String: String] = [:], gzip: Bool? = nil, timeout: Duration? = nil
    ) -> OTLPHTTPExporter {
        OTLPHTTPExporter(
            endpoint: endpoint, encoding: encoding, headers: headers, gzip: gzip, timeout: timeout,
            environment: OTelEnvironment(env))
    }

    @Test("OTEL_EXPORTER_OTLP_ENDPOINT is a base: /v1/logs is appended to its path")
    func baseEndpoint() throws {
        let collector = try Collector("200")
        try Self.exporter(["OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:\(collector.port)"]).export(
            try OTLPHTTPExporterTests.batch())
        try Self.exporter(["OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:\(collector.port)/tenant/"]).export(
            try OTLPHTTPExporterTests.batch())
        #expect(collector.text(0, "path") == "/v1/logs")
        #expect(collector.text(1, "path") == "/tenant/v1/logs")
    }

    @Test("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT is used as is and wins over the base; code wins over both")
    func logsEndpoint() throws {
        let collector = try Collector("200")
        let env = [
            "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": "http://127.0.0.1:\(collector.port)/custom/logs",
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9",
        ]
        try Self.exporter(env).export(try OTLPHTTPExporterTests.batch())
        try Self.exporter(env, endpoint: collector.endpoint).export(try OTLPHTTPExporterTests.batch())
        #expect(collector.text(0, "path") == "/custom/logs")
        #expect(collector.text(1, "path") == "/v1/logs")
    }

    @Test("Headers: percent-decoded key=value pairs; the logs list replaces the general one; code wins per name")
    func headers() throws {
        let collector = try Collector("200")
        let general = [
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:\(collector.port)",
            "OTEL_EXPORTER_OTLP_HEADERS": " Authorization = Bearer%20abc%2Cdef ,x-tenant=shop,broken",
        ]
        try Self.exporter(general).export(try OTLPHTTPExporterTests.batch())
        #expect(collector.headers(0)["authorization"] == "Bearer abc,def")
        #expect(collector.headers(0)["x-tenant"] == "shop")
        var logs = general
        logs["OTEL_EXPORTER_OTLP_LOGS_HEADERS"] = "x-logs=1"
        try Self.exporter(logs, headers: ["X-TENANT": "code"]).export(try OTLPHTTPExporterTests.batch())
        #expect(collector.headers(1)["authorization"] == nil)
        #expect(collector.headers(1)["x-logs"] == "1")
        #expect(collector.headers(1)["x-tenant"] == "code")
    }

    @Test(
        "Protocol: http/json and http/protobuf; grpc is a clear error and nothing is sent, unless code sets the encoding"
    )
    func proto() throws {
        let collector = try Collector("200")
        let base = ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:\(collector.port)"]
        try Self.exporter(base.merging(["OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"]) { $1 }).export(
            try OTLPHTTPExporterTests.batch())
        #expect(collector.text(0, "type") == "application/json")
        try Self.exporter(
            base.merging([
                "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json", "OTEL_EXPORTER_OTLP_LOGS_PROTOCOL": "http/protobuf",
            ]) { $1 }
        )
        .export(try OTLPHTTPExporterTests.batch())
        #expect(collector.text(1, "type") == "application/x-protobuf")
        let grpc = base.merging(["OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"]) { $1 }
        #expect {
            try Self.exporter(grpc).export(try OTLPHTTPExporterTests.batch())
        } throws: { error in
            String(describing: error).contains("OTEL_EXPORTER_OTLP_PROTOCOL=grpc is not supported")
        }
        #expect(collector.requests == 2)
        try Self.exporter(grpc, encoding: .protobuf).export(try OTLPHTTPExporterTests.batch())
        #expect(collector.requests == 3)
    }

    @Test("Compression gzip: Content-Encoding gzip, the collector inflates and parses it; code can turn it off")
    func gzip() throws {
        let collector = try Collector("200")
        let env = [
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:\(collector.port)",
            "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip",
        ]
        let batch = try OTLPHTTPExporterTests.batch()
        try Self.exporter(env).export(batch)
        #expect(collector.headers(0)["content-encoding"] == "gzip")
        #expect(collector.text(0, "error") == nil)
        let json = try #require(collector.text(0, "json"))
        #expect(try OTLPJSON.decode(Array(json.utf8)) == batch)
        let wire = try #require(collector.bytes(0, "wire"))
        let plain = try #require(collector.bytes(0, "body"))
        #expect(wire.count < plain.count, "gzip \(wire.count) B of \(plain.count) B")
        try Self.exporter(env, gzip: false).export(batch)
        #expect(collector.headers(1)["content-encoding"] == nil)
        #expect {
            try Self.exporter(env.merging(["OTEL_EXPORTER_OTLP_COMPRESSION": "zstd"]) { $1 }).export(batch)
        } throws: { error in String(describing: error).contains("zstd") }
    }

    @Test("OTEL_EXPORTER_OTLP_TIMEOUT in milliseconds bounds the export; code wins")
    func timeout() throws {
        let collector = try Collector("silent")
        let env = [
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:\(collector.port)", "OTEL_EXPORTER_OTLP_TIMEOUT": "400",
        ]
        #expect(Self.exporter(env).timeout == .milliseconds(400))
        #expect(Self.exporter(env, timeout: .seconds(2)).timeout == .seconds(2))
        #expect(Self.exporter([:]).timeout == .seconds(10))
        let start = Date()
        #expect { try Self.exporter(env).export(try OTLPHTTPExporterTests.batch()) } throws: { error in
            (error as? ExportError)?.kind == .unavailable
        }
        #expect(Date().timeIntervalSince(start) < 1.5)
        #expect(throws: ExportError.self) {
            try Self.exporter(env.merging(["OTEL_EXPORTER_OTLP_TIMEOUT": "soon"]) { $1 }).export(
                try OTLPHTTPExporterTests.batch())
        }
    }

    @Test("Defaults: localhost:4318/v1/logs, protobuf, no compression")
    func defaults() {
        let e = Self.exporter([:])
        #expect(e.endpoint.absoluteString == "http://localhost:4318/v1/logs")
        #expect(e.encoding == .protobuf && !e.gzip && e.configurationError == nil)
    }

    @Test("Resource attributes: the list, percent-decoded; OTEL_SERVICE_NAME wins over its service.name")
    func resourceAttributes() {
        let env = OTelEnvironment([
            "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=prod,service.name=list,team=a%20b",
            "OTEL_SERVICE_NAME": "from-env",
        ])
        #expect(
            env.resourceAttributes == [
                Attribute("deployment.environment", "prod"), Attribute("team", "a b"),
                Attribute("service.name", "from-env"),
            ])
        #expect(OTelEnvironment(["OTEL_SDK_DISABLED": "TRUE"]).sdkDisabled)
        #expect(!OTelEnvironment(["OTEL_SDK_DISABLED": "1"]).sdkDisabled)
    }
}

extension OTLPEnvironmentTests {
    @Test("https: the server's certificate is verified; OTEL_EXPORTER_OTLP_CERTIFICATE names the trusted one")
    func https() throws {
        let collector = try Collector("200", tls: true)
        let batch = try OTLPHTTPExporterTests.batch()
        #expect(throws: ExportError.self) { try Self.exporter([:], endpoint: collector.httpsEndpoint).export(batch) }
        #expect(collector.requests == 0)
        try Self.exporter(["OTEL_EXPORTER_OTLP_CERTIFICATE": collector.certificate], endpoint: collector.httpsEndpoint)
            .export(batch)
        #expect(collector.requests == 1)
        let json = try #require(collector.text(0, "json"))
        #expect(try OTLPJSON.decode(Array(json.utf8)) == batch)
    }

    @Test("A redirect from https to http is not followed: the reports are kept")
    func downgrade() throws {
        let collector = try Collector("307>http://127.0.0.1:{port}/v1/logs", tls: true)
        let exporter = Self.exporter(
            ["OTEL_EXPORTER_OTLP_CERTIFICATE": collector.certificate], endpoint: collector.httpsEndpoint,
            headers: ["Authorization": "Bearer secret"])
        #expect { try exporter.export(try OTLPHTTPExporterTests.batch()) } throws: { error in
            String(describing: error).contains("from https to http")
        }
        #expect(collector.requests == 1)
    }
}

extension OTLPEnvironmentTests {
    #if compiler(>=6.2)  // exit tests (#expect(processExitsWith:)) need Swift 6.2
    @Test("https: a reset while a large body is sent is an error, no SIGPIPE (in a child process)")
    func httpsReset() async throws {
        let collector = try Collector("reset", tls: true)
        await #expect(processExitsWith: .success) {
            [port = collector.port as Int, certificate = collector.certificate as String] in
            var batch = try OTLPHTTPExporterTests.batch()
            batch.records = Array(repeating: batch.records[0], count: 400)
            let exporter = OTLPHTTPExporter(
                endpoint: URL(string: "https://127.0.0.1:\(port)/v1/logs")!, maxAttempts: 2,
                environment: OTelEnvironment(["OTEL_EXPORTER_OTLP_CERTIFICATE": certificate]))
            do { try exporter.export(batch) } catch { exit(0) }
            exit(3)
        }
        #expect(collector.requests >= 1)
    }
    #endif
}
