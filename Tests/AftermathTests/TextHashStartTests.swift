import CSignalShim
import Foundation
import Testing
import Aftermath
import AftermathTesting
import AftermathNextLaunch
import TestSupport

/// At start the images' ids come from the loader's list (dl_iterate_phdr): a library linked
/// without a build-id note gets its text hash there, flagged; a library with one keeps it.
@Suite("Text hash at start")
struct TextHashStartTests {
    #if compiler(>=6.2)  // exit tests (#expect(processExitsWith:)) need Swift 6.2
    @Test("Loaded before start: the installed images carry the text hash, flagged, and the noted id")
    func installedImages() async throws {
        let dir = try Tool.temporaryDirectory("text-hash-start")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let bare = try TextHashFixture.library("bare", source: TextHashFixture.source(11), buildID: false, in: dir)
        let noted = try TextHashFixture.library("noted", source: TextHashFixture.source(13), buildID: true, in: dir)
        let expected: String = Hex.encode(try TextHashFixture.textHash(ofFile: bare))
        let directory: String = TestSupport.childDirectory("text-hash-start")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        await #expect(processExitsWith: .success) {
            [
                bare = bare as String, noted = noted as String, expected = expected as String,
                directory = directory as String
            ] in
            guard dlopen(bare, RTLD_NOW) != nil, dlopen(noted, RTLD_NOW) != nil else { _exit(10) }
            ExitStatusTests.childStart(directory)
            var images = [aft_image](repeating: aft_image(), count: Int(AFT_MAX_IMAGES))
            let n = Int(aft_installed_images(&images, UInt32(images.count)))
            let loaded = images.prefix(n).map(LoadedImage.init)
            guard let b = loaded.first(where: { $0.path == bare }), let d = loaded.first(where: { $0.path == noted })
            else { _exit(11) }
            guard b.isBuildIDTextHash, b.buildID == expected else { _exit(12) }
            guard !d.isBuildIDTextHash, d.buildID.count == 40 else { _exit(13) }
            _exit(0)
        }
    }
    #endif

    @Test("The run and error files' context (written from Swift) keeps the text-hash mark; a GNU id gets none")
    func contextRoundTrip() {
        let config = Aftermath.Configuration(
            serviceName: "text-hash", serviceVersion: "1", exporter: InMemoryExporter(), reportsDirectory: "/tmp/unused"
        )
        var context = Aftermath.makeContext(config)
        context.appBuildID = String(repeating: "5a", count: 16)
        context.isAppBuildIDTextHash = true
        let hashed = ReportContext(Aftermath.cContext(context))
        #expect(hashed.appBuildID == context.appBuildID && hashed.isAppBuildIDTextHash)
        context.isAppBuildIDTextHash = false
        let gnu = ReportContext(Aftermath.cContext(context))
        #expect(gnu.appBuildID == context.appBuildID && !gnu.isAppBuildIDTextHash)
    }
}
