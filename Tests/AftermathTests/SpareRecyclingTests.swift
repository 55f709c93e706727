import Aftermath
import AftermathTesting
import CSignalShim
import Foundation
import Testing
import TestSupport

/// The run file a launch judged clean, with nothing of its run left to send, is the next
/// launch's spare: a launch creates no inode for it and runs/ does not grow launch by launch.
@Suite("The spare run file, recycled")
struct SpareRecyclingTests {
    #if compiler(>=6.2)  // exit tests (#expect(processExitsWith:)) need Swift 6.2
    @Test("Three launches: each later one's spare is the run file of the one before, and runs/ holds two files")
    func cleanRunsBecomeSpares() async throws {
        let directory: String = TestSupport.childDirectory("spare-recycled")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let runs = directory + "/runs"
        func files() -> [String: UInt64] {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: runs)) ?? []
            return Dictionary(
                uniqueKeysWithValues: names.compactMap { name in
                    StartAndDeliveryTests.inode(runs + "/" + name).map { (name, $0) }
                })
        }
        let spare = AFT_RUN_SPARE_FILE_NAME
        var previous: [String: UInt64] = [:]
        for launch in 1...3 {
            await #expect(processExitsWith: .success) { [directory = directory as String] in
                StartAndDeliveryTests.startAndLeaveSpare(directory)
            }
            let now = files()
            let runFiles = now.filter { $0.key.hasSuffix(".run") }
            #expect(
                now.count == 2 && runFiles.count == 1 && now[spare] != nil, "launch \(launch): \(now.keys.sorted())")
            if launch > 1 {
                let earlierRun = previous.first { $0.key.hasSuffix(".run") }?.value
                #expect(now[spare] == earlierRun, "launch \(launch)'s spare is launch \(launch - 1)'s run file")
                #expect(runFiles.values.first == previous[spare], "launch \(launch)'s run file is the spare it found")
            }
            previous = now
        }
    }
    #endif
}
