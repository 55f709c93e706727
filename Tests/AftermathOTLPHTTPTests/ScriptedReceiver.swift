import AftermathOTLP
import Foundation
import TestSupport

extension OTLPHTTPExporterTests {
    /// A collector process answering successive POSTs as scripted (tool: the script under
    /// Tests/tools that plays it).
    final class Collector {
        let process = Process()
        let out: String
        let port: Int

        /// With tls, it speaks https with a fresh self-signed certificate for 127.0.0.1 (in `certificate`).
        init(_ responses: String, tls: Bool = false, tool: String = "otlp_collector.py") throws {
            BrokenPipe.ignoreSIGPIPE()
            out = FileManager.default.temporaryDirectory.appendingPathComponent("otlp-collector-\(UUID())").path
            try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
            let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .appendingPathComponent("tools/" + tool).path
            var tlsArguments: [String] = []
            if tls {
                let openssl = Process()
                openssl.executableURL = URL(fileURLWithPath: "/usr/bin/env")
                openssl.arguments = [
                    "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", out + "/key.pem", "-out", out + "/cert.pem",
                ]
                openssl.standardError = FileHandle.nullDevice
                try openssl.run()
                openssl.waitUntilExit()
                tlsArguments = [out + "/cert.pem", out + "/key.pem"]
            }
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["python3", script, out, responses] + tlsArguments
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
            guard
                let port = text.split(separator: " ").last.flatMap({
                    Int($0.trimmingCharacters(in: .whitespacesAndNewlines))
                })
            else {
                throw ExportError("collector did not start: \(text)")
            }
            self.port = port
        }

        var endpoint: URL { URL(string: "http://127.0.0.1:\(port)/v1/logs")! }
        var httpsEndpoint: URL { URL(string: "https://127.0.0.1:\(port)/v1/logs")! }
        var certificate: String { out + "/cert.pem" }
        var requests: Int {
            ((try? FileManager.default.contentsOfDirectory(atPath: out)) ?? []).filter { $0.hasSuffix(".method") }.count
        }
        func text(_ n: Int, _ suffix: String) -> String? {
            try? String(contentsOfFile: "\(out)/\(n).\(suffix)", encoding: .utf8)
        }
        func bytes(_ n: Int, _ suffix: String) -> [UInt8]? {
            FileManager.default.contents(atPath: "\(out)/\(n).\(suffix)").map { Array($0) }
        }
        /// The request headers of request n, names in lower case.
        func headers(_ n: Int) -> [String: String] {
            guard let data = FileManager.default.contents(atPath: "\(out)/\(n).headers"),
                let object = try? JSONSerialization.jsonObject(with: data) as? [String: String]
            else { return [:] }
            return object
        }
        /// Waits up to a few seconds for a file the collector writes after answering.
        func await(_ n: Int, _ suffix: String) -> String? {
            for _ in 0..<100 {
                if let text = text(n, suffix) { return text }
                usleep(50_000)
            }
            return nil
        }

        deinit {
            // SIGKILL: the test runner's threads block SIGTERM, and the child inherits the mask.
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            try? FileManager.default.removeItem(atPath: out)
        }
    }
}
