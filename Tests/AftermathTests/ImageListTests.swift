import Aftermath
import AftermathNextLaunch
import CSignalShim
import Foundation
import Testing
import TestSupport

/// The images of a crash or hang file as IMAGE_LIST and IMAGE_PATHS (format version 3): written
/// by a real handler, read back as installed; the version 2 files of the real writers still
/// read; a list whose paths do not add up is refused, never trusted.
@Suite("Image list")
struct ImageListTests {
    /// The types of the sections in a file's body, in order.
    static func sectionTypes(_ bytes: [UInt8]) -> [UInt32] { sectionOffsets(bytes).map { TestSupport.u32(bytes, $0) } }

    @Test("Files of format v2 from the real handler and watchdog still decode, images with their paths")
    func goldenV2() throws {
        let crashBytes = try TestSupport.fixture("v2/sigsegv-null-depth12.crash")
        #expect(TestSupport.u32(crashBytes, 4) & 0xFFFF == 2, "a version 2 file")
        #expect(Self.sectionTypes(crashBytes).contains(UInt32(AFT_SECTION_IMAGES)))
        let crash = try ReportFile.decode(crashBytes).crashReport()
        #expect(crash.signal == SIGSEGV && crash.faultAddress == 8)
        #expect(crash.threads.count >= 3 && crash.threads.first?.crashed == true)
        let main = try #require(crash.images.first { $0.isMainExecutable })
        #expect(main.buildID == crash.context.appBuildID && main.path.hasSuffix("/aftermath-bench"))
        #expect(crash.images.contains { $0.name == "libc.so.6" && $0.buildID.count == 40 })
        #expect(crash.images.allSatisfy { $0.path.hasPrefix("/") || $0.isVDSO })

        let hang = try HangReport(file: ReportFile.decode(TestSupport.fixture("v2/hang-unfinished-killed.hang")))
        #expect(!hang.isFinished && hang.durationMilliseconds >= 1000)
        #expect(hang.images.contains { $0.isMainExecutable && $0.buildID == hang.context.appBuildID })
        #expect(hang.images.allSatisfy { $0.path.hasPrefix("/") || $0.isVDSO })
    }

    #if compiler(>=6.2)  // exit tests (#expect(processExitsWith:)) need Swift 6.2
    @Test("A real crash lists its images without their paths' unused bytes, each as installed")
    func realCrash() async throws {
        let directory: String = TestSupport.childDirectory("image-list")
        await #expect(processExitsWith: .signal(SIGSEGV)) { [directory = directory as String] in
            ExitStatusTests.childStart(directory)
            // The images read at start: a crash that finds them unchanged lists them.
            var installed = [aft_image](repeating: aft_image(), count: Int(AFT_MAX_IMAGES))
            let n = Int(aft_installed_images(&installed, AFT_MAX_IMAGES))
            var expected = ""
            for image in installed.prefix(n) {
                let path = withUnsafeBytes(of: image.path) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
                expected += "\(String(image.start, radix: 16)) \(path)\n"
            }
            guard FileManager.default.createFile(atPath: directory + "/installed.txt", contents: Data(expected.utf8))
            else { exit(3) }
            UnsafeMutablePointer<Int>(bitPattern: 8)!.pointee = 1
        }
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let bytes = try EveryThreadTests.crashFileBytes(directory)
        #expect(TestSupport.u32(bytes, 4) & 0xFFFF == AFT_FORMAT_VERSION)
        let types = Self.sectionTypes(bytes)
        let list = try #require(types.firstIndex(of: UInt32(AFT_SECTION_IMAGE_LIST)))
        #expect(types[list + 1] == UInt32(AFT_SECTION_IMAGE_PATHS) && !types.contains(UInt32(AFT_SECTION_IMAGES)))

        let crash = try ReportFile.decode(bytes).crashReport()
        let installed = try String(contentsOfFile: directory + "/installed.txt", encoding: .utf8)
        let read = crash.images.map { "\(String($0.start, radix: 16)) \($0.path)\n" }.joined()
        #expect(read == installed, "every image, its address and path as installed")
        #expect(crash.images.count > 5 && !crash.imagesTruncated)
        let main = try #require(crash.images.first { $0.isMainExecutable })
        #expect(main.buildID == crash.context.appBuildID)
        // Each image costs its entry and its path: well under the 328 bytes of an IMAGES entry.
        let listBytes = crash.images.reduce(32 + crash.images.count * Int(AFT_IMAGE_ENTRY_SIZE)) {
            $0 + $1.path.utf8.count
        }
        #expect(listBytes * 2 < crash.images.count * MemoryLayout<aft_image>.size)
    }
    #endif

    #if compiler(>=6.2)
    @Test("After Aftermath loads libunwind itself, the images are read again: a crash still lists them, libunwind too")
    func listedAfterLibunwindLoads() async throws {
        let directory: String = TestSupport.childDirectory("image-list-reread")
        await #expect(processExitsWith: .signal(SIGSEGV)) { [directory = directory as String] in
            ExitStatusTests.childStart(directory)
            aft_install_complete()
            guard aft_libunwind_preload() != 0 else { _exit(97) }  // as a first hang or error does
            usleep(1_600_000)  // the run record's next sample (every second) reads them again
            UnsafeMutablePointer<Int>(bitPattern: 8)!.pointee = 1
        }
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let bytes = try EveryThreadTests.crashFileBytes(directory)
        #expect(Self.sectionTypes(bytes).contains(UInt32(AFT_SECTION_IMAGE_LIST)), "not whole aft_image records")
        let crash = try ReportFile.decode(bytes).crashReport()
        #expect(crash.images.contains { $0.name.hasPrefix("libunwind") && $0.buildID.count == 40 })
    }
    #endif

    @Test("A list whose paths overrun their section, or a path too long, reads as no images, truncated")
    func hostilePaths() throws {
        // The v1 golden crash with its IMAGES section's type made unknown (skipped), then one
        // listed image and its paths appended.
        var golden = try TestSupport.fixture("v1/sigsegv-null-depth12.crash")
        let imagesAt = try #require(
            Self.sectionOffsets(golden).first { TestSupport.u32(golden, $0) == UInt32(AFT_SECTION_IMAGES) })
        TestSupport.setU32(&golden, imagesAt, 0xFFFF)
        var image = aft_image()
        image.start = 0x1000
        image.end = 0x2000
        let entry = withUnsafeBytes(of: image) { Array($0.prefix(Int(AFT_IMAGE_ENTRY_SIZE))) }
        func file(pathSize: UInt32, paths: [UInt8]) throws -> ReportFile {
            var bytes = golden
            var listed = entry
            TestSupport.setU32(&listed, 68, pathSize)
            for (type, size, body) in [
                (UInt32(AFT_SECTION_IMAGE_LIST), AFT_IMAGE_ENTRY_SIZE, listed),
                (UInt32(AFT_SECTION_IMAGE_PATHS), 1, paths),
            ] {
                var h = aft_section_header()
                h.type = type
                h.entry_size = size
                h.count = UInt32(body.count) / size
                withUnsafeBytes(of: h) { bytes.append(contentsOf: $0) }
                bytes += body
            }
            return try ReportFile.decode(TestSupport.resealed(bytes))
        }
        let good = try file(pathSize: 5, paths: Array("/a/bc".utf8))
        #expect(good.images.count == 1 && !good.imagesTruncated)
        #expect(LoadedImage(good.images[0]).path == "/a/bc")
        // A list whose paths never came (a file cut between the two): kept, marked truncated.
        var cut = golden
        cut += withUnsafeBytes(
            of: aft_section_header(
                type: UInt32(AFT_SECTION_IMAGE_LIST), entry_size: AFT_IMAGE_ENTRY_SIZE, count: 1, flags: 0)
        ) { Array($0) }
        cut += entry
        let unpathed = try ReportFile.decode(TestSupport.resealed(cut))
        #expect(unpathed.images.count == 1 && unpathed.imagesTruncated)
        // Paths after an IMAGES section are not its paths: its own stay.
        let original = try TestSupport.fixture("v1/sigsegv-null-depth12.crash")
        var stray = original
        stray += withUnsafeBytes(
            of: aft_section_header(type: UInt32(AFT_SECTION_IMAGE_PATHS), entry_size: 1, count: 3, flags: 0)
        ) { Array($0) }
        stray += Array("/x/".utf8)
        let kept = try ReportFile.decode(TestSupport.resealed(stray)).images.map { LoadedImage($0).path }
        #expect(kept == (try ReportFile.decode(original).images.map { LoadedImage($0).path }) && !kept.isEmpty)
        for (size, paths) in [
            (UInt32(6), Array("/a/bc".utf8)), (AFT_PATH_CAPACITY, [UInt8](repeating: 0x61, count: 300)),
        ] {
            let bad = try file(pathSize: size, paths: paths)
            #expect(bad.images.isEmpty && bad.imagesTruncated)
        }
    }

    /// Where each section of a file's body starts.
    static func sectionOffsets(_ bytes: [UInt8]) -> [Int] {
        var offsets: [Int] = []
        var offset = 64
        while offset + 16 <= bytes.count {
            offsets.append(offset)
            offset += 16 + Int(TestSupport.u32(bytes, offset + 4)) * Int(TestSupport.u32(bytes, offset + 8))
        }
        return offsets
    }
}
