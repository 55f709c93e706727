import Foundation
import Testing
import Aftermath
import AftermathNextLaunch
import AftermathOTLP
import AftermathTesting
import CSignalShim
import CHarnessFaults
import TestSupport

@Suite struct ExporterTests {
    private func jsonFiles(in directory: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory).sorted()
    }

    @Test func fileExporterWritesOneValidFilePerBatch() throws {
        let base = try OTLPFixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: base) }
        let directory = base + "/spool/otlp"  // intermediate directories are created
        let exporter = FileExporter(directory: directory)
        var second = OTLPFixtures.crashBatch
        second.records = [LogRecord(timeUnixNano: 3, severityNumber: .error, eventName: "apsio.hang")]

        try exporter.export(OTLPFixtures.crashBatch)
        try exporter.export(second)

        let names = try jsonFiles(in: directory)
        #expect(names.count == 2, "\(names)")  // and no temporary files left behind
        let pattern = /^[0-9]{19}-[0-9A-F]{8}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{12}\.json$/
        var decoded: [LogBatch] = []
        for name in names {
            #expect(name.wholeMatch(of: pattern) != nil, "\(name)")
            let path = directory + "/" + name
            let result = try OTLPFixtures.validate(path)
            #expect(result.status == 0, "\(result.output)")
            decoded.append(try OTLPJSON.decode(Array(try Data(contentsOf: URL(fileURLWithPath: path)))))
        }
        #expect(Set(decoded.map(\.records.count)) == [3, 1])
        #expect(decoded.contains(second))
    }

    @Test func fileExporterWritesNothingForAnEmptyBatch() throws {
        let directory = try OTLPFixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var empty = OTLPFixtures.crashBatch
        empty.records = []
        try FileExporter(directory: directory).export(empty)
        #expect(try jsonFiles(in: directory).isEmpty)
    }

    @Test(arguments: ["", "/sub"])
    func fileExporterThrowsWhenTheDirectoryCannotBeCreated(_ suffix: String) throws {
        // Tests run as root, where a 0555 directory is still writable, so block the directory
        // with a regular file instead.
        let base = try OTLPFixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: base) }
        let blocker = base + "/not-a-directory"
        #expect(FileManager.default.createFile(atPath: blocker, contents: Data("x".utf8)))
        let exporter = FileExporter(directory: blocker + suffix)

        var error: ExportError?
        do { try exporter.export(OTLPFixtures.crashBatch) } catch let e as ExportError { error = e } catch {
            Issue.record("not an ExportError: \(error)")
        }
        #expect(error?.description.contains(blocker + suffix) == true, "\(String(describing: error))")
        #expect(try String(contentsOfFile: blocker, encoding: .utf8) == "x")
    }

    @Test("A dead writer's temporary file is removed by the next export; a live writer's is kept")
    func fileExporterRemovesDeadWritersTemporaries() throws {
        let directory = try OTLPFixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // What a process that died while it exported left, and one another export of this
        // process is still writing (its lock held by another open).
        let dead = directory + "/.1-DEAD.json.A.tmp", live = directory + "/.2-LIVE.json.B.tmp"
        #expect(FileManager.default.createFile(atPath: dead, contents: Data("{\"resourceLo".utf8)))
        #expect(FileManager.default.createFile(atPath: live, contents: Data()))
        let held = open(live, O_RDONLY | O_CLOEXEC)
        #expect(held >= 0 && flock(held, LOCK_EX | LOCK_NB) == 0)
        defer { close(held) }
        try FileExporter(directory: directory).export(OTLPFixtures.crashBatch)
        let names = try jsonFiles(in: directory)
        #expect(names.count == 2, "\(names)")
        #expect(names.contains(".2-LIVE.json.B.tmp") && !names.contains(".1-DEAD.json.A.tmp"))
        #expect(names.contains { $0.hasSuffix(".json") && !$0.hasPrefix(".") })
        #expect(aft_crash_in_progress() == 0)
    }

    @Test func inMemoryExporterFailsThenAcknowledges() throws {
        let exporter = InMemoryExporter()
        let batch = OTLPFixtures.crashBatch
        exporter.failNext(2)
        #expect(throws: ExportError.self) { try exporter.export(batch) }
        #expect(throws: ExportError.self) { try exporter.export(batch) }
        #expect(exporter.batches.isEmpty)  // a failed export is not acknowledged
        try exporter.export(batch)
        try exporter.export(batch)
        #expect(exporter.batches == [batch, batch])
        #expect(exporter.records.count == 2 * batch.records.count)
        #expect(exporter.records.first?.eventName == "app.crash")

        exporter.failNext(1)
        exporter.reset()
        #expect(exporter.batches.isEmpty && exporter.records.isEmpty)
        try exporter.export(batch)  // reset also cleared the pending failure
        #expect(exporter.batches.count == 1)
    }

    @Test func inMemoryExporterIsSafeToShareAcrossTasks() async throws {
        let exporter = InMemoryExporter()
        let record = LogRecord(timeUnixNano: 1, severityNumber: .info)
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<100 {
                group.addTask {
                    try? exporter.export(
                        LogBatch(resource: Resource(), scopeName: "s", scopeVersion: "v", records: [record]))
                }
            }
        }
        #expect(exporter.records.count == 100)
    }
}
