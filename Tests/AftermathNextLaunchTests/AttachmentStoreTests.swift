import AftermathNextLaunch
import AftermathOTLP
import AftermathTesting
import Foundation
import TestSupport
import Testing

/// attachments/: a crash's minidump stored before its record goes, sent after it, deleted only
/// once acknowledged, under its own retention; hostile files skipped with a reason.
@Suite("Pending attachments")
struct AttachmentStoreTests {
    /// A reports directory holding the v1 crash under its own id, and that crash.
    static func directoryWithCrash() throws -> (ReportDirectory, CrashReport) {
        let dir = try TestSupport.reportsDirectory()
        return (dir, try TestSupport.pendingCrash(in: dir))
    }

    /// Bytes standing for a minidump: every byte value, CRLFs and dashes included.
    static let minidump: [UInt8] =
        Array("MDMP".utf8) + (0..<70_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        + Array("\r\n--\r\n".utf8)

    static func collector(_ dir: ReportDirectory, limits: ReportCollector.Limits = .init()) -> ReportCollector {
        var c = ReportCollector(directory: dir, limits: limits)
        c.minidump = { _ in minidump }
        return c
    }

    static func names(_ dir: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []).sorted()
    }

    struct Refusing: LogExporter {
        func export(_ batch: LogBatch) throws {
            throw ExportError("refused", kind: .rejectedByCollector("no such service"))
        }
    }

    @Test("The id: the same for a crash on every attempt, a UUIDv8, never the crash's own")
    func deterministicID() throws {
        let crashID = UUID()
        let id = PendingAttachment.id(forCrash: crashID)
        #expect(id == PendingAttachment.id(forCrash: crashID))
        #expect(id != crashID.lowercased && id != PendingAttachment.id(forCrash: UUID()))
        let uuid = try #require(UUID(uuidString: id))
        #expect(uuid.lowercased == id && Array(id)[14] == "8")
        #expect(Attachment.isValidID(id))
    }

    @Test("Stored before the record goes, named by it, delivered after it, then deleted")
    func deliveredAfterItsRecord() throws {
        let (dir, crash) = try Self.directoryWithCrash()
        let records = InMemoryExporter(), attachments = InMemoryExporter()
        let d = Self.collector(dir).deliver(to: records, attachments: attachments, resource: Resource())
        let id = PendingAttachment.id(forCrash: crash.context.reportID)
        #expect(d.exported == 1 && d.exportError == nil && d.attachmentError == nil)
        #expect(records.records.first?.attributes.first { $0.key == "apsio.attachment.id" }?.value.stringValue == id)
        let sent = try #require(attachments.attachments.first)
        #expect(attachments.attachments.count == 1)
        #expect(sent.id == id && sent.fileName == id + ".dmp" && sent.bytes == Self.minidump)
        #expect(sent.contentType == "application/octet-stream")
        #expect(sent.attribute("app.crash.id") == crash.context.reportID.lowercased)
        #expect(sent.attribute("session.id") == crash.context.sessionID.lowercased)
        #expect(sent.attribute("service.name") == crash.context.serviceName)
        #expect(sent.attribute("service.version") == crash.context.serviceVersion)
        #expect(d.attachments == [id: id])
        #expect(Self.names(dir.crashes).isEmpty && Self.names(dir.attachments).isEmpty)
    }

    @Test("No attachment exporter: no minidump made, no apsio.attachment.id, no attachments/")
    func noExporter() throws {
        let (dir, _) = try Self.directoryWithCrash()
        let records = InMemoryExporter()
        _ = Self.collector(dir).deliver(to: records, resource: Resource())
        #expect(records.records.count == 1)
        #expect(!records.records[0].attributes.contains { $0.key == "apsio.attachment.id" })
        #expect(!FileManager.default.fileExists(atPath: dir.attachments))
    }

    @Test("A record not acknowledged: its attachment is stored but waits for it; both go later")
    func waitsForItsRecord() throws {
        let (dir, _) = try Self.directoryWithCrash()
        let records = InMemoryExporter(), attachments = InMemoryExporter()
        records.failNext(1)
        let first = Self.collector(dir).deliver(to: records, attachments: attachments, resource: Resource())
        #expect(first.exported == 0 && first.exportError != nil)
        #expect(Self.names(dir.attachments).count == 1 && attachments.attachments.isEmpty)
        let mode = try FileManager.default.attributesOfItem(atPath: dir.attachments)[.posixPermissions] as? Int
        #expect(mode == 0o700)
        let file = dir.attachments + "/" + Self.names(dir.attachments)[0]
        #expect(try FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? Int == 0o600)
        let second = Self.collector(dir).deliver(to: records, attachments: attachments, resource: Resource())
        #expect(
            second.exported == 1 && attachments.attachments.count == 1,
            "\(second.exportError ?? "no error"), rejected \(second.rejected.map(\.reason))")
        #expect(Self.names(dir.attachments).isEmpty && Self.names(dir.crashes).isEmpty)
    }

    @Test("An attachment not acknowledged: the record is delivered, the attachment waits")
    func attachmentFailureKeepsIt() throws {
        let (dir, crash) = try Self.directoryWithCrash()
        let records = InMemoryExporter(), attachments = InMemoryExporter()
        attachments.failNext(1)
        let first = Self.collector(dir).deliver(to: records, attachments: attachments, resource: Resource())
        #expect(first.exported == 1 && first.attachmentError != nil && first.attachments.isEmpty)
        #expect(Self.names(dir.crashes).isEmpty)
        #expect(Self.names(dir.attachments) == [PendingAttachment.id(forCrash: crash.context.reportID) + ".attachment"])
        var later = ReportCollector(directory: dir)
        later.minidump = { _ in
            Issue.record("no crash left to make a minidump of")
            return []
        }
        let second = later.deliver(to: records, attachments: attachments, resource: Resource())
        #expect(second.attachments.count == 1 && attachments.attachments.first?.bytes == Self.minidump)
        #expect(Self.names(dir.attachments).isEmpty)
    }

    @Test("A batch refused for good: its records go to rejected/, its attachments are removed")
    func refusedRecordDropsAttachment() throws {
        let (dir, _) = try Self.directoryWithCrash()
        let attachments = InMemoryExporter()
        let d = Self.collector(dir).deliver(to: Refusing(), attachments: attachments, resource: Resource())
        #expect(d.exported == 0 && d.rejected.count == 1)
        #expect(attachments.attachments.isEmpty && Self.names(dir.attachments).isEmpty)
    }

    /// Writes a pending attachment named id, last modified age seconds ago.
    static func pending(_ dir: ReportDirectory, _ id: String, size: Int = 100, age: Double = 0) throws {
        try dir.prepareAttachments()
        let a = Attachment(
            id: id, fileName: id + ".dmp", contentType: "application/octet-stream",
            bytes: Array(repeating: 1, count: size), attributes: [Attribute("app.crash.id", .string(UUID().lowercased))]
        )
        let path = dir.attachments + "/" + id + ".attachment"
        try TestSupport.write(PendingAttachment.encode(a), to: path)
        try FileManager.default.setAttributes([.modificationDate: Date().addingTimeInterval(-age)], ofItemAtPath: path)
    }

    @Test("Retention: by count, age and bytes, the newest kept, each removal with its reason")
    func retention() throws {
        let dir = try TestSupport.reportsDirectory()
        for i in 0..<5 { try Self.pending(dir, "count\(i)", age: Double(100 - i)) }
        try Self.pending(dir, "old", age: 400 * 86400)
        var limits = ReportCollector.Limits()
        limits.maxPendingAttachments = 3
        let exporter = InMemoryExporter()
        let d = ReportCollector(directory: dir, limits: limits).deliver(
            to: InMemoryExporter(), attachments: exporter, resource: Resource())
        #expect(exporter.attachments.map(\.id) == ["count2", "count3", "count4"])
        let reasons = Dictionary(
            uniqueKeysWithValues: d.rejected.map { (($0.path as NSString).lastPathComponent, $0.reason) })
        #expect(reasons["old.attachment"]?.hasPrefix("older than 365 days") == true)
        #expect(reasons["count0.attachment"]?.contains("more than 3 pending attachments") == true)
        #expect(reasons["count1.attachment"]?.hasSuffix("(deleted)") == true)
        #expect(Self.names(dir.attachments).isEmpty)

        for i in 0..<4 { try Self.pending(dir, "bytes\(i)", size: 1000, age: Double(100 - i)) }
        limits = ReportCollector.Limits()
        limits.maxAttachmentBytes = 2500
        let bytes = InMemoryExporter()
        _ = ReportCollector(directory: dir, limits: limits).deliver(
            to: InMemoryExporter(), attachments: bytes, resource: Resource())
        #expect(bytes.attachments.map(\.id) == ["bytes2", "bytes3"])

        try Self.pending(dir, "kept", age: 10)
        _ = ReportCollector(directory: dir).deliver(to: InMemoryExporter(), resource: Resource())
        #expect(Self.names(dir.attachments) == ["kept.attachment"])  // no exporter: it waits
    }

    @Test("Hostile files in attachments/: each skipped with its reason, the good one still sent")
    func hostileFiles() throws {
        let dir = try TestSupport.reportsDirectory()
        try Self.pending(dir, "good", age: 5)
        let a = dir.attachments
        let whole = PendingAttachment.encode(
            Attachment(
                id: "torn", fileName: "torn.dmp", contentType: "x", bytes: Array(repeating: 9, count: 500),
                attributes: []))
        try TestSupport.write(Array(whole.prefix(300)), to: a + "/torn.attachment")
        var flipped = PendingAttachment.encode(
            Attachment(
                id: "flipped", fileName: "f.dmp", contentType: "x", bytes: Array(repeating: 9, count: 500),
                attributes: []))
        flipped[400] ^= 1
        try TestSupport.write(flipped, to: a + "/flipped.attachment")
        try TestSupport.write(
            Array("MDMP not ours".utf8) + Array(repeating: 0, count: 40), to: a + "/foreign.attachment")
        try TestSupport.write(
            PendingAttachment.encode(
                Attachment(id: "other", fileName: "o.dmp", contentType: "x", bytes: [1], attributes: [])),
            to: a + "/renamed.attachment")
        try TestSupport.write([1, 2, 3], to: a + "/short.attachment")
        try TestSupport.write(Array(repeating: 0, count: 5000), to: a + "/huge.attachment")
        try TestSupport.write([1], to: a + "/left.attachment.tmp")
        try TestSupport.write([1], to: a + "/notes.txt")
        try FileManager.default.createSymbolicLink(atPath: a + "/link.attachment", withDestinationPath: "/etc/passwd")
        try FileManager.default.createDirectory(atPath: a + "/dir.attachment", withIntermediateDirectories: false)
        #expect(mkfifo(a + "/fifo.attachment", 0o600) == 0)
        var limits = ReportCollector.Limits()
        limits.maxAttachmentFileBytes = 4096
        let exporter = InMemoryExporter()
        let d = ReportCollector(directory: dir, limits: limits).deliver(
            to: InMemoryExporter(), attachments: exporter, resource: Resource())
        #expect(exporter.attachments.map(\.id) == ["good"])
        let reasons = Dictionary(
            uniqueKeysWithValues: d.rejected.map { (($0.path as NSString).lastPathComponent, $0.reason) })
        #expect(reasons["torn.attachment"]?.hasPrefix("torn attachment") == true)
        #expect(reasons["flipped.attachment"]?.contains("checksum mismatch") == true)
        #expect(reasons["foreign.attachment"]?.hasPrefix("foreign file") == true)
        #expect(reasons["renamed.attachment"]?.contains("names attachment other") == true)
        #expect(reasons["short.attachment"]?.contains("shorter than its header") == true)
        #expect(reasons["huge.attachment"]?.hasPrefix("too large") == true)
        #expect(reasons["left.attachment.tmp"]?.contains("unfinished write") == true)
        #expect(reasons["notes.txt"]?.contains("unexpected file") == true)
        #expect(reasons["link.attachment"]?.contains("symbolic link") == true)
        #expect(reasons["dir.attachment"]?.contains("a directory") == true)
        #expect(reasons["fifo.attachment"]?.contains("a FIFO") == true)
        #expect(reasons.count == 11)
        #expect(Self.names(dir.attachments).isEmpty)
        #expect(FileManager.default.fileExists(atPath: dir.rejected + "/torn.attachment"))
        #expect(FileManager.default.fileExists(atPath: dir.rejected + "/torn.attachment.reason"))
    }
}
