import Foundation
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// A stripped binary's crash symbolicated through a real debuginfod server (Debian's
/// `debuginfod`), started here on a loopback port over a directory holding the debug file.
@Suite(.serialized) struct DebuginfodTests {
    static let server = Tool.which("debuginfod")

    /// A port nothing listens on now (the kernel's choice for an ephemeral bind).
    static func freePort() throws -> UInt16 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Tool.Failure(description: "socket: errno \(errno)") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        guard bound else { throw Tool.Failure(description: "bind: errno \(errno)") }
        return UInt16(bigEndian: address.sin_port)
    }

    /// Whether a plain HTTP GET of `path` on the loopback port answers 200.
    static func answers(port: UInt16, path: String) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = port.bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
        guard connected else { return false }
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let request = "GET \(path) HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n"
        _ = request.withCString { send(fd, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
        var buffer = [UInt8](repeating: 0, count: 64)
        let n = recv(fd, &buffer, buffer.count, 0)
        return n > 12 && String(decoding: buffer[0..<n], as: UTF8.self).hasPrefix("HTTP/1.")
            && buffer[9...11] == [50, 48, 48][...]
    }

    @Test(
        "a stripped binary's crash, symbolicated through debuginfod",
        .enabled(if: server != nil, "the debuginfod binary (Debian package debuginfod) is not installed"))
    func strippedCrashThroughDebuginfod() throws {
        let fixture = try SwiftTrapFixture.get()
        let crash = try fixture.crash("precondition", executable: fixture.stripped)
        let root = try Tool.temporaryDirectory("debuginfod")
        try FileManager.default.createDirectory(atPath: root + "/files", withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: fixture.debugFile, toPath: root + "/files/swift-trap.debug")
        try fixture.otlpRequest(crash).write(toFile: root + "/request.json", atomically: true, encoding: .utf8)

        let port = try Self.freePort()
        BrokenPipe.ignoreSIGPIPE()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try #require(Self.server))
        process.arguments = ["-F", "-p", String(port), "-d", root + "/index.sqlite", "-t", "0", root + "/files"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle(forWritingAtPath: "/dev/null")
        try process.run()
        defer {
            // It may take its time over SIGTERM: a few seconds, then SIGKILL.
            process.terminate()
            let stop = Date().addingTimeInterval(3)
            while process.isRunning && Date() < stop { usleep(20_000) }
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
        }
        // Ready once it has indexed the debug file.
        let deadline = Date().addingTimeInterval(30)
        let path = "/buildid/\(fixture.buildID)/debuginfo"
        while !Self.answers(port: port, path: path) {
            guard Date() < deadline, process.isRunning else {
                Issue.record("debuginfod did not serve \(path) on port \(port) within 30 s")
                return
            }
            usleep(100_000)
        }

        let r = try Tool.aftermath(
            ["symbolicate", root + "/request.json", "--json"],
            environment: [
                "DEBUGINFOD_URLS": "http://127.0.0.1:\(port)",
                "DEBUGINFOD_CACHE_PATH": root + "/cache",
            ])
        #expect(r.status == 0, "\(r.stderr)")
        let views = try JSONDecoder().decode([DebugCommandTests.View].self, from: Data(r.stdout.utf8))
        let view = try #require(views.first)
        let image = try #require(view.images.first)
        #expect(image.debugInfoFound)
        #expect(image.debugSource == "debuginfod")
        #expect(view.swiftRuntimeFailure?.reason == "precondition failure")
        #expect(view.frames.first?.line == fixture.line(of: "func precondition"))
    }
}
