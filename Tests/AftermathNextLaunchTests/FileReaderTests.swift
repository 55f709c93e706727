import Foundation
import Testing
import TestSupport

@testable import AftermathNextLaunch

#if canImport(Glibc)
import Glibc
#endif

/// FileReader's two reads of an open file: into an array, and into memory of the call's own
/// (start's reads, which make no array).
@Suite("File reader")
struct FileReaderTests {
    static func scratch() throws -> String {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("aftermath-reader-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir.path
    }

    /// Both reads of the file at path: the array's, and withBytes' copied out.
    static func bothReads(
        _ path: String, maximumSize: Int
    ) -> (Result<[UInt8], ReportFileError>, Result<[UInt8], ReportFileError>) {
        let fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        defer { if fd >= 0 { close(fd) } }
        let array = Result { () throws(ReportFileError) in try FileReader.read(fd: fd, maximumSize: maximumSize) }
        let raw = Result { () throws(ReportFileError) in
            try FileReader.withBytes(fd: fd, maximumSize: maximumSize) { Array($0) }
        }
        return (array, raw)
    }

    @Test(
        "withBytes hands over what read returns: empty, small, and larger than a stack's share; too large refused alike"
    )
    func sameBytesAsTheArrayRead() throws {
        let dir = try Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for size in [0, 1, 3080, 200 * 1024] {
            let bytes = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
            let path = dir + "/f\(size)"
            try TestSupport.write(bytes, to: path)
            let (array, raw) = Self.bothReads(path, maximumSize: 256 * 1024)
            #expect(try array.get() == bytes)
            #expect(try raw.get() == bytes)
            let (small, smallRaw) = Self.bothReads(path, maximumSize: size - 1)
            if size > 0 {
                #expect(throws: ReportFileError.tooLarge(bytes: size)) { try small.get() }
                #expect(throws: ReportFileError.tooLarge(bytes: size)) { try smallRaw.get() }
            }
        }
    }

    @Test("withBytes refuses a directory or a FIFO open in a file's place, and never blocks on the FIFO")
    func notARegularFile() throws {
        let dir = try Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let fifo = dir + "/fifo"
        #expect(mkfifo(fifo, 0o600) == 0)
        for path in [dir, fifo] {
            let (_, raw) = Self.bothReads(path, maximumSize: 1024)
            #expect(throws: ReportFileError.notARegularFile(kind: "changed while opening")) { try raw.get() }
        }
    }
}
