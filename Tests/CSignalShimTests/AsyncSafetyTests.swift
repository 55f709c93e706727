import Foundation
import Testing
import CSignalShim
import CHarnessFaults
import AftermathNextLaunch
import TestSupport

/// The crash-time boundary, checked on the compiled objects: every `_async.c` object may only
/// call async-signal-safe functions (signal-safety(7)), its own aft_async_* helpers and
/// libunwind's local unwinder.
@Suite("Async-signal safety")
struct AsyncSafetyTests {
    /// The package's root, found from this source file.
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()

    /// The contract as CSignalShim/README.md states it: every `code` span between its
    /// crash-time-allowed markers is a function name, or a prefix when it ends in `*`.
    static let contract: (names: Set<String>, prefixes: [String]) = {
        let text =
            (try? String(contentsOf: root.appendingPathComponent("CSignalShim/README.md"), encoding: .utf8)) ?? ""
        guard let begin = text.range(of: "<!-- crash-time-allowed: begin -->"),
            let end = text.range(of: "<!-- crash-time-allowed: end -->")
        else { return ([], []) }
        let spans = text[begin.upperBound..<end.lowerBound].split(separator: "`", omittingEmptySubsequences: false)
            .enumerated().filter { $0.offset % 2 == 1 }.map { String($0.element) }
        return (
            Set(spans.filter { !$0.hasSuffix("*") }), spans.filter { $0.hasSuffix("*") }.map { String($0.dropLast()) }
        )
    }()

    static func isAllowed(_ symbol: String) -> Bool {
        contract.names.contains(symbol) || contract.prefixes.contains { symbol.hasPrefix($0) }
            // our own crash-time helpers and the data they share with normal-time code
            || symbol.hasPrefix("aft_async_") || symbol.hasPrefix("aft_g_")
    }

    /// Every compiled `*_async.c` object of CSignalShim under the package's build directory
    /// (SwiftPM keeps the source folders: CSignalShim.build/<folder>/<name>.c.o).
    static func asyncObjects() -> [String] { shimObjects(suffix: "_async.c.o") }

    /// Every compiled object of CSignalShim whose name ends in suffix, the newest build of each.
    static func shimObjects(suffix: String = ".c.o") -> [String] {
        let build = root.appendingPathComponent(".build").path
        guard let walker = FileManager.default.enumerator(atPath: build) else { return [] }
        var out: [String: (String, Date)] = [:]
        while let item = walker.nextObject() as? String {
            guard item.contains("CSignalShim.build/"), item.hasSuffix(suffix) else { continue }
            let path = build + "/" + item
            let name = (item as NSString).lastPathComponent
            let date =
                (try? FileManager.default.attributesOfItem(atPath: path)[.modificationDate] as? Date) ?? .distantPast
            if let existing = out[name], existing.1 >= date { continue }
            out[name] = (path, date)  // the newest build of each object
        }
        return out.values.map(\.0).sorted()
    }

    /// What a tool (found on PATH) prints; throws when it fails.
    static func output(of arguments: [String]) throws -> String {
        BrokenPipe.ignoreSIGPIPE()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw CocoaError(.fileReadUnknown) }
        return String(decoding: data, as: UTF8.self)
    }

    static func undefinedSymbols(_ object: String) throws -> [String] {
        try output(of: ["nm", "-u", object]).split(separator: "\n").compactMap {
            $0.split(separator: " ").last.map { String($0.split(separator: "@").first ?? $0) }
        }
    }

    @Test("Crash-time objects call only async-signal-safe functions")
    func undefinedSymbolsAreAllowed() throws {
        let objects = Self.asyncObjects()
        let names = Set(objects.map { ($0 as NSString).lastPathComponent })
        for required in [
            "handler_async.c.o", "report_async.c.o", "report_sections_async.c.o", "images_async.c.o",
            "unwind_async.c.o", "safe_io_async.c.o", "unwind_walk_async.c.o", "unwind_resident_async.c.o",
            "threads_park_async.c.o",
        ] {
            #expect(names.contains(required), "\(required) not found under .build: the check would prove nothing")
        }
        for object in objects {
            let bad = try Self.undefinedSymbols(object).filter { !Self.isAllowed($0) }
            #expect(bad.isEmpty, "\((object as NSString).lastPathComponent) calls \(bad)")
        }
    }

    @Test("The contract's list is read, and rejects what the handler must never call")
    func allowlistRejectsUnsafe() {
        #expect(Self.contract.names.contains("write") && Self.contract.names.contains("memcpy"))
        #expect(Self.contract.prefixes.contains("_ULx86_64_"))
        for symbol in [
            "malloc", "free", "printf", "snprintf", "fopen", "pthread_mutex_lock", "dl_iterate_phdr", "dladdr",
            "backtrace", "strerror", "opendir",
        ] {
            #expect(!Self.isAllowed(symbol))
        }
    }

    @Test("Every C file names its class in its first comment: crash-time files are *_async.c")
    func everyFileIsLabelled() throws {
        let fm = FileManager.default
        var checked = 0
        for dir in ["CSignalShim", "Sources/CAftermathHTTP", "Harness/CFaults"] {
            let path = Self.root.appendingPathComponent(dir).path
            // CSignalShim keeps its files in folders by concern (crash/, hang/, ...): every level.
            for item in try fm.subpathsOfDirectory(atPath: path) where item.hasSuffix(".c") {
                let name = (item as NSString).lastPathComponent
                let head = String((try String(contentsOfFile: path + "/" + item, encoding: .utf8)).prefix(300))
                let label = name.hasSuffix("_async.c") ? "CRASH-TIME CODE" : "NORMAL-TIME CODE"
                #expect(head.contains("\(name): \(label)"), "\(dir)/\(item) does not open with \"\(name): \(label)\"")
                checked += 1
            }
        }
        #expect(checked >= 20, "only \(checked) C files found: the check would prove little")
    }
}
