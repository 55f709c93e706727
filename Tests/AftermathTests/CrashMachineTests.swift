import Aftermath
import AftermathNextLaunch
import AftermathTesting
import Foundation
import Testing
import TestSupport

/// A real crash's machine section: what the minidump's SystemInfo and MiscInfo take.
@Suite("A crash's machine")
struct CrashMachineTests {
    #if compiler(>=6.2)  // exit tests (#expect(processExitsWith:)) need Swift 6.2
    @Test("The processors the process may use, and its start: the crash 1.5 s after it is 1.5 s later")
    func processorsAndStart() async throws {
        let directory: String = TestSupport.childDirectory("crash-machine")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        await #expect(processExitsWith: .signal(SIGSEGV)) { [directory = directory as String] in
            var config = Aftermath.Configuration(
                serviceName: "crash-machine", serviceVersion: "1", exporter: InMemoryExporter(),
                reportsDirectory: directory, deliverPendingReportsSynchronously: true)
            config.hangHeartbeat = .off
            do { try Aftermath.start(config) } catch { exit(10) }
            usleep(1_500_000)
            UnsafeMutablePointer<Int>(bitPattern: 8)!.pointee = 1
        }
        let crash = try #require(EveryThreadTests.crashes(directory).first)
        let machine = try #require(crash.machine, "the crash file has no machine section")
        #expect(Int(machine.cpuCount) == ProcessInfo.processInfo.activeProcessorCount)
        let start = try #require(machine.processStartUnixNano)
        let ran = Double(crash.timeUnixNano) / 1e9 - Double(start) / 1e9
        #expect(ran >= 1.45 && ran < 10, "the process ran \(ran) s before its crash")
        #if arch(x86_64)
        #expect(machine.cpuVendor.count == 12 && machine.x86Identity != nil)
        #endif
    }
    #endif
}
