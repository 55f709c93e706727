import Aftermath
import AftermathNextLaunch
import AftermathOTLP
import AftermathTesting
import CSignalShim
import CHarnessFaults
import AftermathSymbolication
import TestSupport
import Foundation
import Testing

/// Handled errors: recorded by a real child process, read back by the collector.
@Suite("Handled errors")
struct HandledErrorTests {
    struct CheckoutError: Error, CustomStringConvertible {
        var code: Int
        var description: String { "card declined (\(code))" }
    }

    @inline(never)
    static func recordFromKnownFunction() {
        Aftermath.record(error: CheckoutError(code: 51), fingerprint: "checkout-declined")
    }

    static func start(_ directory: String) {
        var config = Aftermath.Configuration(
            serviceName: "errors", serviceVersion: "3.1", exporter: InMemoryExporter(),
            reportsDirectory: directory, fsyncReports: false,
            deliverPendingReportsSynchronously: true)
        config.hangHeartbeat = .off  // the files stay for the test to read: no background delivery
        do { try Aftermath.start(config) } catch { _exit(98) }
    }

    static func directory() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("aftermath-errors-\(UUID())").path
    }

    #if compiler(>=6.2)  // exit tests (#expect(processExitsWith:)) need Swift 6.2
    @Test func recordsTypeMessageStackFingerprintAndSession() async throws {
        let dir = Self.directory()
        await #expect(processExitsWith: .success) { [dir = dir as String] in
            HandledErrorTests.start(dir)
            Aftermath.setScreen("cart")
            HandledErrorTests.recordFromKnownFunction()
            let first = Aftermath.sessionID!
            let second = Aftermath.startNewSession()
            Aftermath.record(error: CocoaError(.fileNoSuchFile))
            try? "\(first.lowercased) \(second.lowercased)".write(
                toFile: dir + "/sessions", atomically: true, encoding: .utf8)
            exit(0)
        }
        let sessions = try String(contentsOfFile: dir + "/sessions", encoding: .utf8).split(separator: " ").map(
            String.init)
        let collector = ReportCollector(directory: ReportDirectory(root: dir))
        let collection = collector.collect(moveRejected: false)
        let errors = collection.reports.filter { $0.kind == .error }.map(\.record)
        try #require(errors.count == 2)
        let first = try #require(errors.first { $0[attribute: "apsio.error.fingerprint"] != nil })
        let second = try #require(errors.first { $0[attribute: "apsio.error.fingerprint"] == nil })

        #expect(first.severityNumber == .error && first.eventName == nil)
        #expect(first[attribute: "exception.type"] == "AftermathTests.HandledErrorTests.CheckoutError")
        #expect(first[attribute: "exception.message"] == "card declined (51)")
        #expect(first[attribute: "apsio.error.fingerprint"] == "checkout-declined")
        #expect(first[attribute: "session.id"]?.stringValue == sessions[0])
        #expect(first[attribute: "service.version"] == "3.1")
        #expect(first[attribute: "app.screen.name"] == "cart")
        #expect(first[attribute: "log.record.uid"]?.stringValue.map(ULID.isValid) == true)
        #expect(second[attribute: "session.id"]?.stringValue == sessions[1])
        #expect(second[attribute: "session.previous_id"]?.stringValue == sessions[0])
        #expect(second[attribute: "exception.type"]?.stringValue?.contains("CocoaError") == true)

        // The stack starts at the caller of record: its first frame is in the function above.
        let stack = try #require(first[attribute: "exception.stacktrace"]?.stringValue)
        let line0 = try #require(stack.split(separator: "\n").first)
        #expect(line0.hasPrefix("0 "))
        let error = try #require(collectorErrors(dir).first { $0.fingerprint != nil })
        let image = try #require(error.images.first { $0.contains(error.frames[0]) })
        let symbol = Symbolicator().symbolicate(
            address: error.frames[0], imagePath: image.path,
            loadAddress: image.start, isReturnAddress: true)
        #expect(symbol?.demangled.contains("recordFromKnownFunction") == true, "\(String(describing: symbol))")
        let images = try #require(first[attribute: "apsio.crash.images"]?.stringValue)
        #expect(images.contains(image.name))
    }
    #endif

    func collectorErrors(_ dir: String) throws -> [HandledError] {
        let errors = ReportDirectory(root: dir).errors
        return try FileManager.default.contentsOfDirectory(atPath: errors).filter { $0.hasSuffix(".error") }.map {
            try HandledErrorFile.decode(FileReader.read(errors + "/" + $0))
        }
    }

    /// The process's private dirty memory (smaps_rollup), in KiB.
    static func privateDirtyKiB() -> Int {
        let text = (try? String(contentsOfFile: "/proc/self/smaps_rollup", encoding: .utf8)) ?? ""
        let line = text.split(separator: "\n").first { $0.hasPrefix("Private_Dirty:") } ?? ""
        return Int(line.split(separator: " ").dropFirst().first ?? "") ?? -1
    }

    #if compiler(>=6.2)  // exit tests (#expect(processExitsWith:)) need Swift 6.2
    @Test("Recording errors on 8 threads keeps no unwinder cache on them (libunwind's tracer keeps 256 KiB a thread)")
    func recordingCostsNoMemoryPerThread() async throws {
        let dir = Self.directory()
        await #expect(processExitsWith: .success) { [dir = dir as String] in
            HandledErrorTests.start(dir)
            Aftermath.record(error: CheckoutError(code: 1))  // this thread's first, before measuring
            let started = DispatchSemaphore(value: 0), go = DispatchSemaphore(value: 0)
            let recorded = DispatchSemaphore(value: 0), end = DispatchSemaphore(value: 0)
            for i in 0..<8 {
                Thread.detachNewThread {
                    started.signal()
                    go.wait()
                    Aftermath.record(error: CheckoutError(code: 100 + i))
                    recorded.signal()
                    end.wait()  // alive while measured: a cache of its own would still be there
                }
            }
            for _ in 0..<8 { started.wait() }
            let before = HandledErrorTests.privateDirtyKiB()
            for _ in 0..<8 { go.signal() }
            for _ in 0..<8 { recorded.wait() }
            let after = HandledErrorTests.privateDirtyKiB()
            // A few pages a thread for the record's own work; the tracer's cache was 256 KiB each.
            exit(before > 0 && after - before < 8 * 64 ? 0 : 1)
        }
    }
    #endif

    #if compiler(>=6.2)  // exit tests (#expect(processExitsWith:)) need Swift 6.2
    @Test func onDiskBeforeRecordReturnsEvenIfTheProcessCrashesNext() async throws {
        let dir = Self.directory()
        await #expect(processExitsWith: .signal(SIGSEGV)) { [dir = dir as String] in
            HandledErrorTests.start(dir)
            Aftermath.record(error: CheckoutError(code: 7))
            UnsafeMutablePointer<Int>(bitPattern: 8)!.pointee = 1
        }
        let reports = ReportCollector(directory: ReportDirectory(root: dir)).collect(moveRejected: false).reports
        let error = try #require(reports.first { $0.kind == .error })
        let crash = try #require(reports.first { $0.kind == .crash })
        #expect(error.record[attribute: "exception.message"] == "card declined (7)")
        #expect(error.record[attribute: "session.id"] == crash.record[attribute: "session.id"])
        #expect(!reports.contains { $0.kind == .abnormalExit })
    }

    @Test func deletedOnlyAfterAcknowledgement() async throws {
        let dir = Self.directory()
        await #expect(processExitsWith: .success) { [dir = dir as String] in
            HandledErrorTests.start(dir)
            Aftermath.record(error: CheckoutError(code: 1))
            exit(0)
        }
        let directory = ReportDirectory(root: dir)
        let exporter = InMemoryExporter()
        exporter.failNext(1)
        let refused = ReportCollector(directory: directory).deliver(to: exporter, resource: Resource(attributes: []))
        #expect(refused.exportError != nil)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.errors).count == 1)
        let accepted = ReportCollector(directory: directory).deliver(to: exporter, resource: Resource(attributes: []))
        #expect(accepted.exported == 1, "\(accepted.exportError ?? "no error"), rejected \(accepted.rejected)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.errors).isEmpty)
    }
    #endif

    @Test func tornAndHostileErrorFilesAreSetAsideWithoutLosingOthers() throws {
        let directory = try TestSupport.reportsDirectory()
        var context = aft_context()
        CString.write("9.0", into: &context.service_version)
        var info = aft_error_info()
        info.time_realtime_ns = 1_700_000_000_000_000_000
        let good = HandledErrorFile.encode(
            .init(
                context: context, info: info, type: Array("T".utf8),
                message: Array("m".utf8), fingerprint: nil, frames: [0x1000], images: []))
        try TestSupport.write(good, to: directory.errors + "/a.error")
        try TestSupport.write(Array(good.prefix(good.count - 9)), to: directory.errors + "/b.error")
        var lying = good
        lying[64 + 16 + 1000 + 16 + 40] = 0xFF  // type_size: hostile, but inside the CRC: resealed
        try TestSupport.write(TestSupport.resealed(lying), to: directory.errors + "/c.error")
        try TestSupport.write([UInt8](repeating: 0x41, count: 10), to: directory.errors + "/d.error")
        let collection = ReportCollector(directory: directory).collect()
        let messages = collection.reports.filter { $0.kind == .error }.compactMap {
            $0.record[attribute: "exception.message"]?.stringValue
        }
        #expect(messages.contains("m"))
        #expect(collection.rejected.count == 2)  // b (truncated) and d (junk)
        #expect(collection.reports.filter { $0.kind == .error }.count == 2)  // a, and c clamped to its text
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.rejected).contains("b.error"))
    }
}
