import AftermathNextLaunch
import AftermathOTLP
import CSignalShim
import Foundation

/// Shared by the OTLP and exporter tests.
package enum OTLPFixtures {
    /// Runs Tests/tools/validate_otlp.py on a file; returns its exit status and combined output.
    package static func validate(_ path: String) throws -> (status: Int32, output: String) {
        let script = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("tools/validate_otlp.py").path
        BrokenPipe.ignoreSIGPIPE()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", script, path]
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    /// A fresh, empty directory under the system temporary directory.
    package static func temporaryDirectory() throws -> String {
        let path = FileManager.default.temporaryDirectory
            .appendingPathComponent("aftermath-tests-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    /// A crash report as the next launch sends it.
    package static let crashBatch = LogBatch(
        resource: Resource(attributes: [
            Attribute("service.name", "shop"),
            Attribute("service.version", "2.4.1"),
            Attribute("os.name", "Debian GNU/Linux"),
            Attribute("os.version", "12"),
            Attribute("telemetry.sdk.name", "aftermath"),
        ]),
        scopeName: "aftermath",
        scopeVersion: "0.1.0",
        records: [
            LogRecord(
                timeUnixNano: 1_750_000_000_123_456_789,  // above 2^53: a double would round it
                observedTimeUnixNano: 18_446_744_073_709_551_615,
                severityNumber: .fatal,
                eventName: "app.crash",
                body: "Segmentation fault",
                attributes: [
                    Attribute("exception.type", "SIGSEGV (SEGV_MAPERR)"),
                    Attribute(
                        "exception.message",
                        "Quote \" backslash \\ newline \n tab \t nul \u{0} bell \u{7} del \u{7F} é 日本 👍🏽 \u{2028}"),
                    Attribute("exception.stacktrace", "0 shop 0x000055d0c0ffee00\n1 libc.so.6 0x00007f1234567890\n"),
                    Attribute("apsio.hang.duration", .int(Int64.max)),
                    Attribute("negative", .int(Int64.min)),
                    Attribute("apsio.hang.unfinished", true),
                    Attribute("ratio", 0.1),
                    Attribute("tiny", .double(.leastNonzeroMagnitude)),
                    Attribute("huge", .double(1.7976931348623157e308)),
                    Attribute("nan", .double(.nan)),
                    Attribute("inf", .double(.infinity)),
                    Attribute("minus.inf", .double(-.infinity)),
                    Attribute("raw", .bytes([0, 1, 2, 0xFE, 0xFF])),
                    Attribute("raw.empty", .bytes([])),
                    Attribute("threads", .array(["main", 7, false, .array([])])),
                    Attribute(
                        "image",
                        .kvlist([
                            Attribute("name", "libshop.so"),
                            Attribute("in_app", true),
                            Attribute("load_address", .int(0x7F12_3456_0000)),
                        ])),
                ]
            ),
            LogRecord(timeUnixNano: 1, severityNumber: .error, eventName: "apsio.hang"),
            {
                var handled = LogRecord(timeUnixNano: 2, severityNumber: .error)
                handled.severityText = nil
                return handled
            }(),
        ]
    )
}
