import Aftermath
import AftermathTesting
import CSignalShim
import Foundation
import TestSupport
import Testing

/// The large zero-fill tables of the crash and hang code, as an app that started Aftermath holds
/// them: only the pages the app uses are resident, and the first-used bytes of two tables
/// share one (the thread registry's last slots with the watchdog's first fields, the Swift async
/// state's last bytes with the known images' first ones).
@Suite("Tables' pages")
struct TablePagesTests {
    /// The address in this process and size of the data symbol name (readelf, the load bias from
    /// /proc/self/maps); nil when it is not there.
    static func symbol(_ name: String) -> (address: UInt, size: Int)? {
        guard let executable = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"),
            let table = readelf(["-sW", executable])
        else { return nil }
        var bias: UInt = 0
        let maps = (try? String(contentsOfFile: "/proc/self/maps", encoding: .utf8)) ?? ""
        for line in maps.split(separator: "\n") where line.hasSuffix(executable) {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            if fields.count > 2, fields[2] == "00000000",
                let start = UInt(fields[0].split(separator: "-")[0], radix: 16)
            {
                bias = start
                break
            }
        }
        for line in table.split(separator: "\n") {
            let f = line.split(separator: " ", omittingEmptySubsequences: true)
            guard f.count >= 8, f[7] == name, let value = UInt(f[1], radix: 16) else { continue }
            let size = f[2].hasPrefix("0x") ? Int(f[2].dropFirst(2), radix: 16) : Int(f[2])
            return (bias + value, size ?? 0)
        }
        return nil
    }

    /// What readelf prints, nil when it fails.
    static func readelf(_ arguments: [String]) -> String? {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["readelf"] + arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        guard (try? process.run()) != nil else { return nil }
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return process.terminationStatus == 0 ? String(decoding: data, as: UTF8.self) : nil
    }

    /// The indices of the resident pages of a page-aligned table.
    static func residentPages(_ table: (address: UInt, size: Int)) -> [Int] {
        let page = UInt(sysconf(Int32(_SC_PAGESIZE)))
        return (0..<(table.size + Int(page) - 1) / Int(page)).filter { i in
            let start = table.address + UInt(i) * page
            return TestSupport.residentPages(start, start + page) == 1
        }
    }

    #if compiler(>=6.2)  // exit tests (#expect(processExitsWith:)) need Swift 6.2
    @Test(
        "After start with hang watching: the thread registry and the watchdog share one resident page; the Swift async state's first pages stay untouched"
    )
    func tablesShareTheirPages() async {
        await #expect(processExitsWith: .success) {
            let seen = StartAndDeliveryTests.startAndSettle("table-pages") ?? []
            guard seen.isSuperset(of: ["aftermath.hang", "aftermath.ping"]),
                let threads = TablePagesTests.symbol("aft_g_pair_threads_watchdog"),
                let async = TablePagesTests.symbol("aft_g_pair_async_images")
            else { exit(11) }
            // The registry (1,024 slots of 16 bytes) after 1 KiB, then the watchdog: they meet at
            // 17 KiB, in the pair's fifth 4 KiB page.
            let page = Int(sysconf(Int32(_SC_PAGESIZE)))
            guard TablePagesTests.residentPages(threads) == [17 * 1024 / page] else { exit(12) }
            // The known images are the pair's last bytes; the Swift async state, whose code
            // ranges (one an image) and fields are its last bytes, is right before them. Its
            // first pages are never written; what is, is one run of pages around the one where
            // they meet (this test process has about 70 images: the ranges reach the page
            // before, the images the pages after).
            let known = Int(AFT_MAX_IMAGES) * (Int(AFT_IMAGE_ENTRY_SIZE) + Int(AFT_PATH_CAPACITY) + 8)
            let meeting = (async.size - known) / page
            let resident = TablePagesTests.residentPages(async)
            guard let first = resident.first, let last = resident.last, resident == Array(first...last),
                resident.contains(meeting), first > 1 || page > 4096
            else { exit(13) }
            exit(0)
        }
    }
    #endif
}
