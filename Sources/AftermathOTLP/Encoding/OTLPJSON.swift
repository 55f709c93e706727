import Foundation

/// OTLP/JSON encoding of a ``LogBatch`` as an `ExportLogsServiceRequest`, through Foundation's
/// JSON encoder.
///
/// The output follows the OTLP/JSON rules (keys sorted, so the same batch is the same bytes): lowerCamelCase keys, 64-bit integers as decimal
/// strings, enums as integers, bytes as base64, absent optional fields omitted. Non-finite
/// doubles are written as the proto3 JSON strings `"NaN"`, `"Infinity"` and `"-Infinity"`.
public enum OTLPJSON {
    /// Encodes `batch` as UTF-8 OTLP/JSON; `pretty` indents it.
    public static func encode(_ batch: LogBatch, pretty: Bool = false) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting =
            pretty ? [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes] : [.sortedKeys, .withoutEscapingSlashes]
        encoder.nonConformingFloatEncodingStrategy = .convertToString(
            positiveInfinity: "Infinity", negativeInfinity: "-Infinity", nan: "NaN")
        // The wire types hold only strings, integers, booleans and finite-or-named doubles:
        // encoding them cannot fail.
        guard var out = try? encoder.encode(Wire.Request(batch)) else { return Array("{}".utf8) }
        if pretty { out.append(UInt8(ascii: "\n")) }
        return Array(out)
    }

    /// Encodes `batch` as an OTLP/JSON string; `pretty` indents it.
    public static func encodeString(_ batch: LogBatch, pretty: Bool = false) -> String {
        String(decoding: encode(batch, pretty: pretty), as: UTF8.self)
    }

    /// A document that is not OTLP/JSON of the shape ``encode(_:pretty:)`` writes.
    package struct DecodeError: Error, CustomStringConvertible, Sendable {
        package var description: String
    }

    /// Decodes an `ExportLogsServiceRequest` with at most one `ResourceLogs` and one `ScopeLogs`
    /// (as ``encode(_:pretty:)`` and the file exporter write), with Foundation's decoder. For the
    /// debug command, the harnesses and tests; unknown keys are ignored.
    package static func decode(_ bytes: [UInt8]) throws(DecodeError) -> LogBatch {
        try decoded(Wire.Request.self, bytes).batch()
    }

    /// Decodes every batch of an `ExportLogsServiceRequest` (one per resource and scope), as a
    /// collector stores requests from many senders. For the debug command.
    package static func decodeBatches(_ bytes: [UInt8]) throws(DecodeError) -> [LogBatch] {
        try decoded(Wire.Request.self, bytes).batches
    }

    /// Decodes one OTLP/JSON `LogRecord` object (it must have a time). For the debug command.
    package static func decodeRecord(_ bytes: [UInt8]) throws(DecodeError) -> LogRecord {
        let record = try decoded(Wire.LogRecordJSON.self, bytes)
        guard record.timeUnixNano != nil else { throw DecodeError(description: "not a log record: no timeUnixNano") }
        return record.record
    }

    private static func decoded<T: Decodable>(_ type: T.Type, _ bytes: [UInt8]) throws(DecodeError) -> T {
        let decoder = JSONDecoder()
        decoder.nonConformingFloatDecodingStrategy = .convertFromString(
            positiveInfinity: "Infinity", negativeInfinity: "-Infinity", nan: "NaN")
        do {
            return try decoder.decode(type, from: Data(bytes))
        } catch {
            throw DecodeError(description: "not OTLP/JSON: \(error)")
        }
    }
}

/// The OTLP/JSON shapes, field for field.
private enum Wire {
    struct Request: Codable {
        var resourceLogs: [ResourceLogs]

        init(_ b: LogBatch) {
            resourceLogs = [
                ResourceLogs(
                    resource: Resource(attributes: b.resource.attributes.map(KeyValue.init)),
                    scopeLogs: [
                        ScopeLogs(
                            scope: Scope(name: b.scopeName, version: b.scopeVersion),
                            logRecords: b.records.map(LogRecordJSON.init))
                    ])
            ]
        }

        /// Every resource and scope as its own batch.
        var batches: [LogBatch] {
            resourceLogs.flatMap { resourceLog in
                let resource = AftermathOTLP.Resource(
                    attributes: (resourceLog.resource?.attributes ?? []).map(\.attribute))
                return (resourceLog.scopeLogs ?? []).map { scopeLog in
                    LogBatch(
                        resource: resource, scopeName: scopeLog.scope?.name ?? "",
                        scopeVersion: scopeLog.scope?.version ?? "", records: (scopeLog.logRecords ?? []).map(\.record))
                }
            }
        }

        func batch() throws(OTLPJSON.DecodeError) -> LogBatch {
            var result = LogBatch(resource: AftermathOTLP.Resource(), scopeName: "", scopeVersion: "", records: [])
            guard let resourceLog = resourceLogs.first else { return result }
            guard resourceLogs.count == 1 else { throw .init(description: "more than one resourceLogs entry") }
            result.resource.attributes = (resourceLog.resource?.attributes ?? []).map(\.attribute)
            guard let scopeLog = resourceLog.scopeLogs?.first else { return result }
            guard resourceLog.scopeLogs?.count == 1 else { throw .init(description: "more than one scopeLogs entry") }
            result.scopeName = scopeLog.scope?.name ?? ""
            result.scopeVersion = scopeLog.scope?.version ?? ""
            result.records = (scopeLog.logRecords ?? []).map(\.record)
            return result
        }
    }

    struct ResourceLogs: Codable {
        var resource: Resource?
        var scopeLogs: [ScopeLogs]?
    }

    struct Resource: Codable {
        var attributes: [KeyValue]?
    }

    struct ScopeLogs: Codable {
        var scope: Scope?
        var logRecords: [LogRecordJSON]?
    }

    struct Scope: Codable {
        var name: String?
        var version: String?
    }

    struct LogRecordJSON: Codable {
        var timeUnixNano: Int64String<UInt64>?
        var observedTimeUnixNano: Int64String<UInt64>?
        var severityNumber: Int32?
        var severityText: String?
        var eventName: String?
        var body: AnyValue?
        var attributes: [KeyValue]?

        init(_ r: LogRecord) {
            timeUnixNano = Int64String(r.timeUnixNano)
            observedTimeUnixNano = Int64String(r.observedTimeUnixNano)
            severityNumber = r.severityNumber.rawValue
            severityText = r.severityText
            eventName = r.eventName
            body = r.body.map(AnyValue.init)
            attributes = r.attributes.map(KeyValue.init)
        }

        var record: LogRecord {
            var r = LogRecord(
                timeUnixNano: timeUnixNano?.value ?? 0, observedTimeUnixNano: observedTimeUnixNano?.value ?? 0,
                severityNumber: SeverityNumber(rawValue: severityNumber ?? 0), eventName: eventName,
                body: body?.value, attributes: (attributes ?? []).map(\.attribute))
            r.severityText = severityText
            return r
        }
    }

    struct KeyValue: Codable {
        var key: String
        var value: AnyValue

        init(_ a: Attribute) {
            key = a.key
            value = AnyValue(a.value)
        }

        var attribute: Attribute { Attribute(key, value.value) }
    }

    struct ArrayValue: Codable { var values: [AnyValue]? }
    struct KeyValueList: Codable { var values: [KeyValue]? }

    /// An AnyValue: exactly one of its fields.
    struct AnyValue: Codable {
        var value: AttributeValue

        init(_ v: AttributeValue) { value = v }

        enum CodingKeys: String, CodingKey {
            case stringValue, boolValue, intValue, doubleValue, arrayValue, kvlistValue, bytesValue
        }

        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            switch value {
            case .string(let s): try c.encode(s, forKey: .stringValue)
            case .bool(let b): try c.encode(b, forKey: .boolValue)
            case .int(let i): try c.encode(String(i), forKey: .intValue)
            case .double(let d): try c.encode(d, forKey: .doubleValue)
            case .bytes(let b): try c.encode(Data(b).base64EncodedString(), forKey: .bytesValue)
            case .array(let values): try c.encode(ArrayValue(values: values.map(AnyValue.init)), forKey: .arrayValue)
            case .kvlist(let pairs): try c.encode(KeyValueList(values: pairs.map(KeyValue.init)), forKey: .kvlistValue)
            }
        }

        init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            if let s = try c.decodeIfPresent(String.self, forKey: .stringValue) {
                value = .string(s)
            } else if let b = try c.decodeIfPresent(Bool.self, forKey: .boolValue) {
                value = .bool(b)
            } else if let i = try c.decodeIfPresent(Int64String<Int64>.self, forKey: .intValue) {
                value = .int(i.value)
            } else if let d = try c.decodeIfPresent(Double.self, forKey: .doubleValue) {
                value = .double(d)
            } else if let text = try c.decodeIfPresent(String.self, forKey: .bytesValue) {
                // proto3 JSON accepts standard and URL-safe base64, with or without padding.
                var standard = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
                standard += String(repeating: "=", count: (4 - standard.count % 4) % 4)
                guard let data = Data(base64Encoded: standard) else {
                    throw DecodingError.dataCorruptedError(forKey: .bytesValue, in: c, debugDescription: "not base64")
                }
                value = .bytes(Array(data))
            } else if let a = try c.decodeIfPresent(ArrayValue.self, forKey: .arrayValue) {
                value = .array((a.values ?? []).map(\.value))
            } else if let l = try c.decodeIfPresent(KeyValueList.self, forKey: .kvlistValue) {
                value = .kvlist((l.values ?? []).map(\.attribute))
            } else {
                throw DecodingError.dataCorrupted(
                    .init(codingPath: c.codingPath, debugDescription: "an AnyValue with no value"))
            }
        }
    }

    /// A 64-bit integer: written as a decimal string, read from a string or a number.
    struct Int64String<T: FixedWidthInteger & Codable & Sendable>: Codable {
        var value: T

        init(_ value: T) { self.value = value }

        func encode(to encoder: any Encoder) throws {
            var c = encoder.singleValueContainer()
            try c.encode(String(value))
        }

        init(from decoder: any Decoder) throws {
            let c = try decoder.singleValueContainer()
            if let text = try? c.decode(String.self) {
                guard let v = T(text) else {
                    throw DecodingError.dataCorruptedError(in: c, debugDescription: "\(text) is not a \(T.self)")
                }
                value = v
            } else {
                value = try c.decode(T.self)
            }
        }
    }
}
