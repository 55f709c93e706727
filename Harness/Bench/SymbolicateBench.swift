import AftermathSymbolication
import Foundation

/// `aftermath-bench symbolicate [--file PATH] [--lookups N]`: DWARF symbolication speed on a
/// large binary with debug info (default: the debug build of the test bundle, ~50 MB and more).
/// Time to the first frame (locating the file, opening it with libdwfl, the compile-unit table,
/// the scope walk), then frames a second once its tables are loaded.
enum SymbolicateBench {
    static func run(_ arguments: [String]) {
        func option(_ name: String) -> String? {
            guard let i = arguments.firstIndex(of: name), i + 1 < arguments.count else { return nil }
            return arguments[i + 1]
        }
        let products = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
            .deletingLastPathComponent().deletingLastPathComponent()
        let path = option("--file") ?? products.appendingPathComponent("debug/AftermathPackageTests.xctest").path
        let lookups = Int(option("--lookups") ?? "") ?? 20_000
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: path),
            let size = attributes[.size] as? Int
        else {
            print("no file \(path): build the tests (swift build --build-tests) or pass --file")
            exit(1)
        }
        guard let functions = functionAddresses(path), !functions.isEmpty else {
            print("no function symbols in \(path) (nm from binutils is needed)")
            exit(1)
        }
        let buildID = DebugFileLocator.buildID(of: path) ?? ""
        let loadAddress: UInt64 = 0x5555_0000_0000
        let image = ImageReference(
            name: (path as NSString).lastPathComponent, path: path, buildID: buildID,
            loadAddress: loadAddress, isInApp: true)
        let step = max(1, functions.count / lookups)
        let sample = stride(from: 0, to: functions.count, by: step).prefix(lookups).map { loadAddress + functions[$0] }
        print("file: \(path), \(size / 1_000_000) MB, \(functions.count) functions")

        // Time to first frame: a fresh symbolicator each time (the file is in the page cache
        // after the first run).
        var firsts: [Double] = []
        for i in 0..<5 {
            let symbolicator = DWARFSymbolicator(locator: DebugFileLocator(debugDirectories: [], debuginfod: false))
            let start = DispatchTime.now().uptimeNanoseconds
            _ = symbolicator.symbolicate(address: sample[sample.count / 2 + i], image: image, isReturnAddress: false)
            firsts.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6)
        }
        print(
            String(
                format: "time to first frame: %.1f ms first run, %.1f ms median of the next 4",
                firsts[0], firsts.dropFirst().sorted()[2]))

        // Frames a second once loaded.
        let symbolicator = DWARFSymbolicator(locator: DebugFileLocator(debugDirectories: [], debuginfod: false))
        _ = symbolicator.symbolicate(address: sample[0], image: image, isReturnAddress: false)
        var lined: [UInt64] = [], inlined = 0
        var start = DispatchTime.now().uptimeNanoseconds
        for address in sample {
            if let frame = symbolicator.symbolicate(address: address, image: image, isReturnAddress: false) {
                if frame.location != nil { lined.append(address) }
                inlined += frame.inlined.count
            }
        }
        var seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        print(
            String(
                format:
                    "all functions: %d lookups in %.2f s: %.0f frames a second (%d with file:line, %d inlined frames)",
                sample.count, seconds, Double(sample.count) / seconds, lined.count, inlined))
        // Only addresses with source lines (an app's own code): the line table and scope walk every time.
        guard !lined.isEmpty else { return }
        let rounds = max(1, 20_000 / lined.count)
        start = DispatchTime.now().uptimeNanoseconds
        for _ in 0..<rounds {
            for address in lined {
                _ = symbolicator.symbolicate(address: address, image: image, isReturnAddress: false)
            }
        }
        seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        print(
            String(
                format: "with file:line only: %d lookups in %.2f s: %.0f frames a second",
                rounds * lined.count, seconds, Double(rounds * lined.count) / seconds))
    }

    /// Addresses inside the file's function symbols (the middle of each), from nm.
    static func functionAddresses(_ path: String) -> [UInt64]? {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["nm", "--defined-only", "-S", path]
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return nil }
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        var result: [UInt64] = []
        for line in String(decoding: data, as: UTF8.self).split(separator: "\n") {
            let f = line.split(separator: " ")
            guard f.count >= 4, f[2] == "T" || f[2] == "t", let a = UInt64(f[0], radix: 16),
                let s = UInt64(f[1], radix: 16), s > 0
            else { continue }
            result.append(a + s / 2)
        }
        return result.sorted()
    }
}
