import Foundation
import Testing
import AftermathOTLP
import TestSupport

@Suite struct OTLPJSONTests {
    @Test func outputPassesTheStrictValidator() throws {
        let directory = try OTLPFixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        for pretty in [false, true] {
            let path = directory + "/batch-\(pretty).json"
            try Data(OTLPJSON.encode(OTLPFixtures.crashBatch, pretty: pretty)).write(to: URL(fileURLWithPath: path))
            let result = try OTLPFixtures.validate(path)
            #expect(result.status == 0, "\(result.output)")
            #expect(result.output.contains("OK (3 log records)"))
        }
    }

    @Test(arguments: [
        ("snake_case key", #"{"resource_logs":[]}"#, "not lowerCamelCase"),
        (
            "numeric timeUnixNano",
            #"{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"timeUnixNano":1750000000123456789}]}]}]}"#, "timeUnixNano"
        ),
        (
            "numeric intValue", #"{"resourceLogs":[{"resource":{"attributes":[{"key":"a","value":{"intValue":5}}]}}]}"#,
            "intValue"
        ),
        (
            "enum name severity",
            #"{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"severityNumber":"SEVERITY_NUMBER_FATAL"}]}]}]}"#,
            "severityNumber"
        ),
        (
            "unknown key", #"{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"eventNam":"app.crash"}]}]}]}"#,
            "no field named"
        ),
        (
            "bare NaN", #"{"resourceLogs":[{"resource":{"attributes":[{"key":"a","value":{"doubleValue":NaN}}]}}]}"#,
            "NaN"
        ),
    ])
    func validatorRejectsBadJSON(_ name: String, json: String, reason: String) throws {
        let directory = try OTLPFixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/bad.json"
        try json.write(toFile: path, atomically: true, encoding: .utf8)
        let result = try OTLPFixtures.validate(path)
        #expect(result.status == 1, "\(name): \(result.output)")
        #expect(result.output.contains(reason), "\(name): \(result.output)")
    }

    @Test func keysOrderAndEncodingFollowOTLPJSON() {
        let batch = LogBatch(
            resource: Resource(attributes: [Attribute("service.name", "shop")]),
            scopeName: "aftermath", scopeVersion: "1.0",
            records: [
                LogRecord(
                    timeUnixNano: 9_007_199_254_740_993, observedTimeUnixNano: 5, severityNumber: .fatal,
                    eventName: "app.crash", body: .bytes(Array("hi!?".utf8)),
                    attributes: [Attribute("n", -3), Attribute("d", 2.5), Attribute("c", "\u{1}\"\\")]
                )
            ]
        )
        #expect(
            OTLPJSON.encodeString(batch) == #"""
                {"resourceLogs":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"shop"}}]},"scopeLogs":[{"logRecords":[{"attributes":[{"key":"n","value":{"intValue":"-3"}},{"key":"d","value":{"doubleValue":2.5}},{"key":"c","value":{"stringValue":"\u0001\"\\"}}],"body":{"bytesValue":"aGkhPw=="},"eventName":"app.crash","observedTimeUnixNano":"5","severityNumber":21,"severityText":"FATAL","timeUnixNano":"9007199254740993"}],"scope":{"name":"aftermath","version":"1.0"}}]}]}
                """#)
    }

    @Test func absentOptionalFieldsAreOmitted() {
        var record = LogRecord(timeUnixNano: 1, severityNumber: .error)
        record.severityText = nil
        let json = OTLPJSON.encodeString(
            LogBatch(resource: Resource(), scopeName: "s", scopeVersion: "", records: [record]))
        #expect(!json.contains("severityText"))
        #expect(!json.contains("eventName"))
        #expect(!json.contains("body"))
    }

    @Test func roundTripIsLossless() throws {
        for pretty in [false, true] {
            let decoded = try OTLPJSON.decode(OTLPJSON.encode(OTLPFixtures.crashBatch, pretty: pretty))
            // NaN != NaN, so compare the NaN attribute separately and the rest with ==.
            let nanKey = "nan"
            #expect(decoded.records[0][attribute: nanKey]?.doubleValue?.isNaN == true)
            func withoutNaN(_ batch: LogBatch) -> LogBatch {
                var copy = batch
                copy.records[0].attributes.removeAll { $0.key == nanKey }
                return copy
            }
            #expect(withoutNaN(decoded) == withoutNaN(OTLPFixtures.crashBatch))
            #expect(decoded.records[2].severityText == nil)
            #expect(decoded.records[0].timeUnixNano == 1_750_000_000_123_456_789)
        }
    }

    @Test(arguments: [
        0.1, -0.0, 1e-7, 5e20, 123456789.123, Double.leastNonzeroMagnitude, Double.greatestFiniteMagnitude,
        -2.2250738585072014e-308,
    ])
    func doublesRoundTripExactly(_ value: Double) throws {
        let batch = LogBatch(
            resource: Resource(), scopeName: "s", scopeVersion: "v",
            records: [LogRecord(timeUnixNano: 0, body: .double(value))])
        let decoded = try OTLPJSON.decode(OTLPJSON.encode(batch))
        #expect(decoded.records[0].body?.doubleValue?.bitPattern == value.bitPattern)
    }

    @Test func decodesForeignButValidOTLPJSON() throws {
        // Numbers for 64-bit fields, unknown-to-us fields, escapes and surrogate pairs.
        let json = #"""
            { "resourceLogs": [ { "scopeLogs": [ { "logRecords": [ {
                "timeUnixNano": 12, "severityNumber": 17, "traceId": "", "body": {"stringValue": "\ud83d\udc4d \u00e9\/"},
                "attributes": [ {"key": "b", "value": {"bytesValue": "_-8"}} ] } ] } ] } ] }
            """#
        let batch = try OTLPJSON.decode(Array(json.utf8))
        #expect(batch.records.count == 1)
        #expect(batch.records[0].timeUnixNano == 12)
        #expect(batch.records[0].severityNumber == .error)
        #expect(batch.records[0].severityText == nil)
        #expect(batch.records[0].body == "👍 é/")
        #expect(batch.records[0][attribute: "b"] == .bytes([0xFF, 0xEF]))
    }

    @Test(arguments: [
        "", "{", "[]", "[{}]", #"{"resourceLogs":[[]]}"#, #"{"resourceLogs":{}}"#, #"{"resourceLogs":[{},{}]}"#,
        #"{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"timeUnixNano":"-1"}]}]}]}"#,
        #"{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":{}}]}]}]}"#,
        #"{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":{"stringValue":"\ud800"}}]}]}]}"#,
        #"{"resourceLogs":[]} x"#,
    ])
    func decodeRejectsMalformedInput(_ json: String) {
        #expect(throws: OTLPJSON.DecodeError.self) { try OTLPJSON.decode(Array(json.utf8)) }
    }

    @Test func severityText() {
        #expect([SeverityNumber.info, .warn, .error, .fatal].map(\.text) == ["INFO", "WARN", "ERROR", "FATAL"])
        #expect(SeverityNumber(rawValue: 18).text == "ERROR2")
        #expect(LogRecord(timeUnixNano: 0, severityNumber: .fatal).severityText == "FATAL")
    }
}
