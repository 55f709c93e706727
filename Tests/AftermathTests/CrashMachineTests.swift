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
    @Test("The processors, the process's start and its CPU time: a crash after 1.5 s, 1.2 s of it spent computing")
    func processorsAndStart() async throws {
        let directory: String = TestSupport.childDirectory("crash-machine")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        await #expect(processExitsWith: .signal(SIGSEGV)) { [directory = directory as String] in
            var config = Aftermath.Configuration(
                serviceName: "crash-machine", serviceVersion: "1", exporter: InMemoryExporter(),
                reportsDirectory: directory, deliverPendingReportsSynchronously: true)
            config.hangHeartbeat = .off
            do { try Aftermath.start(config) } catch { exit(10) }
            usleep(300_000)
            CrashMachineTests.spin(seconds: 1.2)
            UnsafeMutablePointer<Int>(bitPattern: 8)!.pointee = 1
        }
        let crash = try #require(EveryThreadTests.crashes(directory).first)
        let machine = try #require(crash.machine, "the crash file has no machine section")
        #expect(Int(machine.cpuCount) == ProcessInfo.processInfo.activeProcessorCount)
        let start = try #require(machine.processStartUnixNano)
        let ran = Double(crash.timeUnixNano) / 1e9 - Double(start) / 1e9
        #expect(ran >= 1.45 && ran < 10, "the process ran \(ran) s before its crash")
        #if arch(x86_64)
        #expect(machine.cpuVendor.count == 12)
        // The processor the kernel describes: family, model and stepping from the signature, and
        // leaf 1's feature bits for two flags every x86-64 processor has.
        let identity = try #require(machine.x86Identity)
        let kernel = try Self.kernelProcessor()
        #expect(
            identity.family == kernel.family && identity.model == kernel.model && identity.stepping == kernel.stepping,
            "signature 0x\(String(machine.cpuSignature, radix: 16)) against /proc/cpuinfo's \(kernel)")
        #expect(machine.cpuFeatures & 1 == 1 && machine.cpuFeatures >> 26 & 1 == 1, "fpu and sse2 in leaf 1's edx")
        #endif
        // The CPU time at the crash, from the handler: at least the spin, no more than it ran.
        let user = try #require(crash.cpuUserMicroseconds, "no CPU time recorded")
        let system = try #require(crash.cpuSystemMicroseconds)
        #expect(user >= 1_100_000 && Double(user + system) / 1e6 <= ran * 2 + 0.5, "user \(user) system \(system) µs")
    }
    #endif

    /// The first processor's family, model and stepping as /proc/cpuinfo shows them.
    static func kernelProcessor() throws -> (family: UInt32, model: UInt32, stepping: UInt32) {
        let text = try String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)
        var fields: [String: UInt32] = [:]
        for line in text.split(separator: "\n") {
            if line.isEmpty { break }
            let parts = line.split(separator: ":", maxSplits: 1)
            guard parts.count == 2 else { continue }
            let key = parts[0].trimmingCharacters(in: .whitespaces)
            if fields[key] == nil, let value = UInt32(parts[1].trimmingCharacters(in: .whitespaces)) {
                fields[key] = value
            }
        }
        return (
            try #require(fields["cpu family"]), try #require(fields["model"]), try #require(fields["stepping"])
        )
    }

    /// Computes until the process has spent `seconds` of CPU time in user mode.
    @inline(never)
    static func spin(seconds: Double) {
        var usage = rusage()
        var x: UInt64 = 1
        repeat {
            for _ in 0..<100_000 { x = x &* 6_364_136_223_846_793_005 &+ 1 }
            getrusage(RUSAGE_SELF.rawValue, &usage)
        } while Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6 < seconds
        withExtendedLifetime(x) {}
    }
}
