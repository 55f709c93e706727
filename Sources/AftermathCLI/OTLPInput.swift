import AftermathOTLP
import Foundation

/// OTLP/JSON as a collector stores it (an export request, JSON lines of requests, or a single
/// log record), decoded with Foundation's JSONDecoder into the SDK's model. Here, in the tool:
/// the app's libraries hold no JSON parser.
enum OTLPInput {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// The records in `data`, each with its resource's service.name.
    static func records(_ data: Data) throws -> [(record: LogRecord, serviceName: String?)] {
        let decoder = JSONDecoder()
        if let request = try? decoder.decode(Request.self, from: data), request.resourceLogs != nil {
            return request.records
        }
        if let record = try? decoder.decode(Record.self, from: data), record.timeUnixNano != nil {
            return [(record.model, nil)]
        }
        // JSON lines: one request (or record) a line, as the collector's file exporter writes.
        var result: [(LogRecord, String?)] = []
        var lineNumber = 0
        for line in data.split(separator: UInt8(ascii: "\n")) {
            lineNumber += 1
            guard line.contains(where: { !($0 == 32 || $0 == 9 || $0 == 13) }) else { continue }
            if let request = try? decoder.decode(Request.self, from: Data(line)), request.resourceLogs != nil {
                result += request.records
            } else if let record = try? decoder.decode(Record.self, from: Data(line)), record.timeUnixNano != nil {
                result.append((record.model, nil))
            } else {
                throw Failure(description: "line \(lineNumber) is neither an OTLP/JSON logs request nor a log record")
            }
        }
        guard lineNumber > 0 else { throw Failure(description: "empty input") }
        return result
    }

    struct Request: Decodable {
        var resourceLogs: [ResourceLogs]?

        var records: [(record: LogRecord, serviceName: String?)] {
            (resourceLogs ?? []).flatMap { resource in
                let service = resource.resource?.attributes?.first { $0.key == "service.name" }?.value?.model
                    .flatMap { if case .string(let s) = $0 { s } else { nil } }
                return (resource.scopeLogs ?? []).flatMap { $0.logRecords ?? [] }.map { ($0.model, service) }
            }
        }
    }

    struct ResourceLogs: Decodable {
        var resource: Resource?
        var scopeLogs: [ScopeLogs]?
    }

    struct Resource: Decodable {
        var attributes: [KeyValue]?
    }

    struct ScopeLogs: Decodable {
        var logRecords: [Record]?
    }

    struct Record: Decodable {
        var timeUnixNano: Number?
        var observedTimeUnixNano: Number?
        var severityNumber: Int32?
        var severityText: String?
        var eventName: String?
        var attributes: [KeyValue]?

        var model: LogRecord {
            LogRecord(timeUnixNano: timeUnixNano?.value ?? 0, observedTimeUnixNano: observedTimeUnixNano?.value,
                      severityNumber: SeverityNumber(rawValue: severityNumber ?? 0), severityText: severityText,
                      eventName: eventName,
                      attributes: (attributes ?? []).compactMap { kv in kv.value?.model.map { Attribute(kv.key, $0) } })
        }
    }

    struct KeyValue: Decodable {
        var key: String
        var value: Value?
    }

    /// AnyValue; 64-bit integers come as strings (proto3 JSON) or numbers.
    final class Value: Decodable {
        var stringValue: String?
        var boolValue: Bool?
        var intValue: Number?
        var doubleValue: Double?
        var bytesValue: String?
        var arrayValue: ArrayValue?
        var kvlistValue: KeyValueList?

        var model: AttributeValue? {
            if let stringValue { return .string(stringValue) }
            if let boolValue { return .bool(boolValue) }
            if let intValue { return .int(Int64(bitPattern: intValue.value)) }
            if let doubleValue { return .double(doubleValue) }
            if let bytesValue, let data = Data(base64Encoded: bytesValue) { return .bytes(Array(data)) }
            if let arrayValue { return .array((arrayValue.values ?? []).compactMap(\.model)) }
            if let kvlistValue {
                return .kvlist((kvlistValue.values ?? []).compactMap { kv in kv.value?.model.map { Attribute(kv.key, $0) } })
            }
            return nil
        }
    }

    struct ArrayValue: Decodable {
        var values: [Value]?
    }

    struct KeyValueList: Decodable {
        var values: [KeyValue]?
    }

    /// A 64-bit integer as a JSON string or number.
    struct Number: Decodable {
        var value: UInt64

        init(from decoder: Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let text = try? container.decode(String.self) {
                if let unsigned = UInt64(text) { value = unsigned; return }
                if let signed = Int64(text) { value = UInt64(bitPattern: signed); return }
                throw DecodingError.dataCorruptedError(in: container, debugDescription: "not an integer: \(text)")
            }
            if let unsigned = try? container.decode(UInt64.self) { value = unsigned; return }
            value = UInt64(bitPattern: try container.decode(Int64.self))
        }
    }
}
