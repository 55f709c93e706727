import Foundation
import Testing

/// Where CSignalShim's globals land in an app's binary: this test executable links the shim as
/// an app does. The small mutable ones belong in .data, together; in .bss the linker interleaves
/// them with the capture's large arrays, and each one start writes dirties a page of its own.
@Suite("CSignalShim's globals in the linked binary")
struct StateLayoutTests {
    struct Symbol {
        var name: String
        var size: Int
        var section: String
    }

    /// The OBJECT symbols of this executable (readelf -sW), each with its section's name.
    static func objects() throws -> [Symbol] {
        let run = AsyncSafetyTests.output(of:)
        let executable = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        // "  [45] .bss  NOBITS ...": section numbers to names.
        var sections: [String: String] = [:]
        for line in try run(["readelf", "-SW", executable]).split(separator: "\n") {
            guard let open = line.firstIndex(of: "["), let close = line.firstIndex(of: "]") else { continue }
            let number = line[line.index(after: open)..<close].trimmingCharacters(in: .whitespaces)
            if let name = line[line.index(after: close)...].split(separator: " ").first {
                sections[number] = String(name)
            }
        }
        // "   Num: Value Size Type Bind Vis Ndx Name"
        return try run(["readelf", "-sW", executable]).split(separator: "\n").compactMap { line in
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count >= 8, fields[3] == "OBJECT" else { return nil }
            let text = String(fields[2])
            guard let size = text.hasPrefix("0x") ? Int(text.dropFirst(2), radix: 16) : Int(text) else { return nil }
            let section = sections[String(fields[6])] ?? String(fields[6])
            return Symbol(name: String(fields[7]), size: size, section: section)
        }
    }

    /// The data symbols CSignalShim's own objects define (not the test targets' C helpers).
    static func shimDataSymbols() throws -> Set<String> {
        var names = Set<String>()
        for object in AsyncSafetyTests.shimObjects() {
            for line in try AsyncSafetyTests.output(of: ["nm", "--defined-only", object]).split(separator: "\n") {
                let fields = line.split(separator: " ")
                if fields.count == 3, "bBdD".contains(fields[1]) { names.insert(String(fields[2])) }
            }
        }
        return names
    }

    @Test("No small global of CSignalShim in .bss; the large capture arrays still are (no file bloat)")
    func smallStateIsPacked() throws {
        let shim = try Self.shimDataSymbols()
        #expect(shim.count > 50, "CSignalShim's objects not found")
        let ours = try Self.objects().filter { shim.contains($0.name) }
        let smallInBSS = ours.filter { $0.section == ".bss" && $0.size < 4096 }.map(\.name).sorted()
        #expect(smallInBSS == [], "small globals in .bss: \(smallInBSS)")
        // The capture's records stay zero-fill: megabytes that cost an app nothing until used.
        #expect(ours.contains { $0.name == "aft_g_threads" && $0.section == ".bss" && $0.size > 1 << 20 })
        #expect(ours.contains { $0.section == ".data" && $0.name == "aft_g_crashing_tid" })
    }
}
