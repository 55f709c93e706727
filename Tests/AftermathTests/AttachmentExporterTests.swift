import Aftermath
import AftermathNextLaunch
import AftermathOTLP
import AftermathTesting
import Foundation
import TestSupport
import Testing

/// FileExporter's attachments (`<id>.dmp` beside the JSON files) and the configuration's
/// default attachment exporter.
@Suite("Attachment exporters")
struct AttachmentExporterTests {
    static func attachment(_ id: String = PendingAttachment.id(forCrash: UUID())) -> AftermathOTLP.Attachment {
        Attachment(
            id: id, fileName: id + ".dmp", contentType: "application/octet-stream",
            bytes: Array("MDMP".utf8) + (0..<5000).map { UInt8(truncatingIfNeeded: $0) }, attributes: [])
    }

    static func mode(_ path: String) throws -> Int? {
        try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
    }

    @Test("FileExporter: <id>.dmp, 0600, the bytes as given, nothing else left; again: replaced")
    func dmpFile() throws {
        let base = try OTLPFixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: base) }
        let exporter = FileExporter(directory: base + "/out")
        let a = Self.attachment()
        let path = try exporter.export(a)
        #expect(path == base + "/out/" + a.id + ".dmp")
        #expect(try FileManager.default.contentsOfDirectory(atPath: base + "/out") == [a.id + ".dmp"])
        #expect(FileManager.default.contents(atPath: base + "/out/" + a.id + ".dmp").map(Array.init) == a.bytes)
        #expect(try Self.mode(base + "/out/" + a.id + ".dmp") == 0o600)
        #expect(try Self.mode(base + "/out") == 0o700)
        var again = a
        again.bytes = [1, 2, 3]
        _ = try exporter.export(again)
        #expect(FileManager.default.contents(atPath: base + "/out/" + a.id + ".dmp").map(Array.init) == [1, 2, 3])
        #expect(try FileManager.default.contentsOfDirectory(atPath: base + "/out").count == 1)
    }

    @Test("FileExporter: a link planted at <id>.dmp is replaced, never written through; a bad id refused")
    func hostileNames() throws {
        let base = try OTLPFixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: base) }
        let victim = base + "/victim"
        try TestSupport.write(Array("keep".utf8), to: victim)
        let out = base + "/out"
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: false)
        let a = Self.attachment()
        try FileManager.default.createSymbolicLink(atPath: out + "/" + a.id + ".dmp", withDestinationPath: victim)
        _ = try FileExporter(directory: out).export(a)
        #expect(FileManager.default.contents(atPath: victim).map(Array.init) == Array("keep".utf8))
        let st = try FileManager.default.attributesOfItem(atPath: out + "/" + a.id + ".dmp")
        #expect(st[.type] as? FileAttributeType == .typeRegular)
        for bad in ["../escape", "", ".hidden", "a/b", String(repeating: "x", count: 65)] {
            do {
                _ = try FileExporter(directory: out).export(Self.attachment(bad))
                Issue.record("\(bad) accepted")
            } catch let error as ExportError {
                guard case .rejectedByCollector = error.kind else {
                    Issue.record("\(error.kind)")
                    continue
                }
            }
        }
        #expect(!FileManager.default.fileExists(atPath: base + "/escape.dmp"))
    }

    struct LogsOnly: LogExporter {
        func export(_ batch: LogBatch) throws {}
    }

    /// An app's exporter of both kinds, the second conformance in an extension of its own.
    struct Both: LogExporter {
        var name = "both"
        func export(_ batch: LogBatch) throws {}
    }

    @Test("Configuration: the log exporter is the attachment exporter when it can be; else none")
    func defaultAttachmentExporter() {
        let file = Aftermath.Configuration(
            serviceName: "s", serviceVersion: "1", exporter: FileExporter(directory: "/x"))
        #expect((file.attachmentExporter as? FileExporter)?.directory == "/x")
        let logsOnly = Aftermath.Configuration(serviceName: "s", serviceVersion: "1", exporter: LogsOnly())
        #expect(logsOnly.attachmentExporter == nil)
        let memory = InMemoryExporter()
        let chosen = Aftermath.Configuration(
            serviceName: "s", serviceVersion: "1", exporter: LogsOnly(), attachmentExporter: memory)
        #expect(chosen.attachmentExporter as? InMemoryExporter === memory)
        let both = Aftermath.Configuration(serviceName: "s", serviceVersion: "1", exporter: Both(name: "mine"))
        #expect((both.attachmentExporter as? Both)?.name == "mine")
        let inMemory = Aftermath.Configuration(serviceName: "s", serviceVersion: "1", exporter: memory)
        #expect(inMemory.attachmentExporter as? InMemoryExporter === memory)
    }

    @Test("Through a delivery: the record's apsio.attachment.id names the .dmp beside its JSON file")
    func besideTheJSON() throws {
        let dir = try TestSupport.reportsDirectory()
        let crash = try TestSupport.pendingCrash(in: dir)
        let out = try OTLPFixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: out) }
        var collector = ReportCollector(directory: dir)
        collector.minidump = { _ in Array("MDMP-bytes".utf8) }
        let exporter = FileExporter(directory: out)
        let d = collector.deliver(to: exporter, attachments: exporter, resource: Resource())
        #expect(d.exported == 1 && d.attachments.count == 1)
        let names = try FileManager.default.contentsOfDirectory(atPath: out).sorted()
        let json = try #require(names.first { $0.hasSuffix(".json") })
        let batch = try OTLPJSON.decode(Array(try Data(contentsOf: URL(fileURLWithPath: out + "/" + json))))
        let id = try #require(
            batch.records.first?.attributes.first { $0.key == "apsio.attachment.id" }?.value.stringValue)
        #expect(id == PendingAttachment.id(forCrash: crash.context.reportID))
        #expect(names.contains(id + ".dmp") && names.count == 2)
        #expect(d.attachments[id] == out + "/" + id + ".dmp")
        #expect(
            FileManager.default.contents(atPath: out + "/" + id + ".dmp").map(Array.init) == Array("MDMP-bytes".utf8))
    }
}

extension AttachmentExporterTests.Both: AttachmentExporter {
    func export(_ attachment: AftermathOTLP.Attachment) throws -> String? { nil }
}
