import AftermathNextLaunch
import AftermathOTLP
import AftermathOTLPHTTP
import Foundation
import Synchronization
import TestSupport
import Testing

/// The Breakpad/Crashpad upload protocol against a receiver on 127.0.0.1
/// (Tests/tools/breakpad_receiver.py), which parses each request's multipart body field by field.
@Suite("Breakpad uploader", .serialized)
struct BreakpadUploaderTests {
    typealias Receiver = OTLPHTTPExporterTests.Collector

    static func receiver(_ answers: String) throws -> Receiver {
        try Receiver(answers, tool: "breakpad_receiver.py")
    }

    static func url(_ r: Receiver) -> URL { URL(string: "http://127.0.0.1:\(r.port)/submit")! }

    /// A minidump-like body holding what could confuse a parser: CRLFs, dashes, NULs.
    static let bytes: [UInt8] =
        Array("MDMP".utf8) + (0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 9) }
        + Array("\r\n--\r\n\r\n".utf8)

    static func attachment() -> AftermathOTLP.Attachment {
        let crashID = UUID()
        let id = PendingAttachment.id(forCrash: crashID)
        return Attachment(
            id: id, fileName: id + ".dmp", contentType: "application/octet-stream", bytes: bytes,
            attributes: [
                Attribute("service.name", "shop"), Attribute("service.version", "4.12.0"),
                Attribute("app.crash.id", .string(crashID.lowercased)),
                Attribute("session.id", .string(UUID().lowercased)),
            ])
    }

    /// Request n's parts as the receiver parsed them: (name, filename, content type, size).
    static func parts(_ r: Receiver, _ n: Int) throws -> [[String: Any]] {
        let text = try #require(r.text(n, "parts"), "receiver: \(r.text(n, "error") ?? "no request")")
        return try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [[String: Any]])
    }

    @Test("gzip (the default): every field in order, the minidump's bytes unchanged, the answer kept")
    func gzipUpload() throws {
        let r = try Self.receiver("200=CrashID=bp-6fa4c1d0")
        let a = Self.attachment()
        let receipt = try BreakpadUploader(url: Self.url(r)).export(a)
        #expect(receipt == "CrashID=bp-6fa4c1d0")
        #expect(r.requests == 1 && r.text(0, "error") == nil)
        #expect(r.text(0, "method") == "POST" && r.text(0, "path") == "/submit")
        let headers = r.headers(0)
        #expect(headers["content-encoding"] == "gzip")
        #expect(headers["content-type"]?.hasPrefix("multipart/form-data; boundary=") == true)
        #expect((r.bytes(0, "wire")?.count ?? .max) < Self.bytes.count)
        let parts = try Self.parts(r, 0)
        #expect(
            parts.map { $0["name"] as? String }
                == ["prod", "ver", "guid", "app.crash.id", "session.id", "upload_file_minidump"])
        #expect(parts.dropLast().allSatisfy { $0["filename"] is NSNull && $0["content_type"] is NSNull })
        #expect(parts.last?["filename"] as? String == a.id + ".dmp")
        #expect(parts.last?["content_type"] as? String == "application/octet-stream")
        #expect(r.bytes(0, "part.upload_file_minidump") == Self.bytes)
        #expect(r.text(0, "part.prod") == "shop" && r.text(0, "part.ver") == "4.12.0")
        #expect(r.text(0, "part.guid") == a.id)
        #expect(r.text(0, "part.app.crash.id") == a.attribute("app.crash.id"))
        #expect(r.text(0, "part.session.id") == a.attribute("session.id"))
    }

    @Test("Uncompressed, with Socorro's fields: configured fields win by name, the minidump field is reserved")
    func plainWithFields() throws {
        let r = try Self.receiver("200")
        let uploader = BreakpadUploader(
            url: Self.url(r), fields: ["ProductName": "Shop", "ver": "4.12.0-rc1", "upload_file_minidump": "x"],
            headers: ["Authorization": "Bearer t0ken"], gzip: false)
        #expect(try uploader.export(Self.attachment()) == "")
        #expect(r.headers(0)["content-encoding"] == nil)
        #expect(r.headers(0)["authorization"] == "Bearer t0ken")
        let names = try Self.parts(r, 0).map { $0["name"] as? String }
        #expect(names == ["prod", "ver", "guid", "app.crash.id", "session.id", "ProductName", "upload_file_minidump"])
        #expect(r.text(0, "part.ver") == "4.12.0-rc1" && r.text(0, "part.ProductName") == "Shop")
        #expect(r.bytes(0, "part.upload_file_minidump") == Self.bytes)
    }

    @Test(
        "4xx refused for good; 408, 429, 5xx unavailable; a redirect kept, not followed",
        arguments: [
            ("400=bad product", "rejected"), ("413", "rejected"), ("408", "unavailable"), ("429", "unavailable"),
            ("500", "unavailable"), ("503", "unavailable"), ("302", "failed"),
        ])
    func answers(answer: String, expected: String) throws {
        let r = try Self.receiver(answer)
        do {
            _ = try BreakpadUploader(url: Self.url(r)).export(Self.attachment())
            Issue.record("\(answer) acknowledged")
        } catch let error as ExportError {
            switch error.kind {
            case .rejectedByCollector(let message):
                #expect(expected == "rejected")
                #expect(message.hasPrefix("HTTP " + answer.prefix(3)))
                if answer.contains("=") { #expect(message.hasSuffix("bad product")) }
            case .unavailable: #expect(expected == "unavailable")
            case .failed: #expect(expected == "failed")
            }
        }
        #expect(r.requests == 1)
    }

    @Test("A silent server: unavailable within the timeout; garbage: an error, never a crash")
    func silentAndGarbage() throws {
        let silent = try Self.receiver("silent")
        let start = Date()
        #expect(throws: ExportError.self) {
            _ = try BreakpadUploader(url: Self.url(silent), timeout: .milliseconds(700)).export(Self.attachment())
        }
        #expect(Date().timeIntervalSince(start) < 5)
        let garbage = try Self.receiver("garbage")
        #expect(throws: ExportError.self) {
            _ = try BreakpadUploader(url: Self.url(garbage), timeout: .seconds(5)).export(Self.attachment())
        }
    }

    /// Records kept in memory.
    final class Records: LogExporter {
        let records = Mutex<[LogRecord]>([])
        func export(_ batch: LogBatch) throws { records.withLock { $0 += batch.records } }
    }

    @Test("No upload endpoint: the records are delivered, the attachment waits; later it goes")
    func unreachableThenUp() throws {
        let dir = try TestSupport.reportsDirectory()
        let crash = try TestSupport.pendingCrash(in: dir)
        var collector = ReportCollector(directory: dir)
        collector.minidump = { _ in BreakpadUploaderTests.bytes }
        let records = Records()
        let down = BreakpadUploader(url: URL(string: "http://127.0.0.1:9/submit")!, timeout: .seconds(2))
        let first = collector.deliver(to: records, attachments: down, resource: Resource())
        let id = PendingAttachment.id(forCrash: crash.context.reportID)
        #expect(first.exported == 1 && first.exportError == nil)
        #expect(first.attachmentError?.contains("127.0.0.1:9") == true)
        #expect(records.records.withLock { $0.first?.attributes.contains { $0.key == "apsio.attachment.id" } } == true)
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.crashes).isEmpty)
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.attachments) == [id + ".attachment"])

        let up = try Self.receiver("200=bp-0001")
        let second = collector.deliver(
            to: records, attachments: BreakpadUploader(url: Self.url(up)), resource: Resource())
        #expect(second.exported == 0 && second.attachments == [id: "bp-0001"])
        #expect(up.bytes(0, "part.upload_file_minidump") == Self.bytes)
        #expect(up.text(0, "part.app.crash.id") == crash.context.reportID.lowercased)
        #expect(up.text(0, "part.prod") == crash.context.serviceName)
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.attachments).isEmpty)
    }
}
