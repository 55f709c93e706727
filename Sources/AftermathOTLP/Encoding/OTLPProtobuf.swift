/// OTLP/protobuf encoding of a ``LogBatch`` as an `ExportLogsServiceRequest`
/// (opentelemetry-proto, logs v1): the default OTLP/HTTP payload, `application/x-protobuf`.
///
/// Hand-written wire format (no protobuf runtime is available here): varints, fixed64 and
/// length-delimited fields, in field-number order. The field numbers are the proto's:
/// ExportLogsServiceRequest.resource_logs = 1; ResourceLogs.resource = 1, scope_logs = 2;
/// Resource.attributes = 1; ScopeLogs.scope = 1, log_records = 2; InstrumentationScope.name = 1,
/// version = 2; LogRecord.time_unix_nano = 1 (fixed64), severity_number = 2,
/// severity_text = 3, body = 5, attributes = 6, observed_time_unix_nano = 11 (fixed64),
/// event_name = 12; KeyValue.key = 1, value = 2; AnyValue.string_value = 1, bool_value = 2,
/// int_value = 3, double_value = 4, array_value = 5, kvlist_value = 6, bytes_value = 7;
/// ArrayValue.values = 1; KeyValueList.values = 1.
public enum OTLPProtobuf {
    /// Encodes batch as a serialized ExportLogsServiceRequest.
    public static func encode(_ batch: LogBatch) -> [UInt8] {
        var scope = Writer()
        scope.string(1, batch.scopeName)
        scope.string(2, batch.scopeVersion)
        var scopeLogs = Writer()
        scopeLogs.message(1, scope.bytes)
        for record in batch.records { scopeLogs.message(2, logRecord(record)) }
        var resource = Writer()
        for attribute in batch.resource.attributes { resource.message(1, keyValue(attribute)) }
        var resourceLogs = Writer()
        resourceLogs.message(1, resource.bytes)
        resourceLogs.message(2, scopeLogs.bytes)
        var request = Writer()
        request.message(1, resourceLogs.bytes)
        return request.bytes
    }

    static func logRecord(_ r: LogRecord) -> [UInt8] {
        var w = Writer()
        w.fixed64(1, r.timeUnixNano)
        w.varint(2, UInt64(bitPattern: Int64(r.severityNumber.rawValue)))
        if let text = r.severityText { w.string(3, text) }
        if let body = r.body { w.message(5, anyValue(body)) }
        for attribute in r.attributes { w.message(6, keyValue(attribute)) }
        w.fixed64(11, r.observedTimeUnixNano)
        if let name = r.eventName { w.string(12, name) }
        return w.bytes
    }

    static func keyValue(_ a: Attribute) -> [UInt8] {
        var w = Writer()
        w.string(1, a.key)
        w.message(2, anyValue(a.value))
        return w.bytes
    }

    static func anyValue(_ v: AttributeValue) -> [UInt8] {
        var w = Writer()
        switch v {
        case .string(let s): w.string(1, s, always: true)
        case .bool(let b): w.varint(2, b ? 1 : 0, always: true)
        case .int(let i): w.varint(3, UInt64(bitPattern: i), always: true)
        case .double(let d): w.fixed64(4, d.bitPattern, always: true)
        case .array(let values):
            var array = Writer()
            for value in values { array.message(1, anyValue(value)) }
            w.message(5, array.bytes, always: true)
        case .kvlist(let pairs):
            var list = Writer()
            for pair in pairs { list.message(1, keyValue(pair)) }
            w.message(6, list.bytes, always: true)
        case .bytes(let bytes): w.message(7, bytes, always: true)
        }
        return w.bytes
    }

    /// Protobuf wire-format writer. Scalar fields at their default (0, empty) are omitted as
    /// proto3 does, except members of a oneof (AnyValue), which must be present to be set.
    struct Writer {
        var bytes: [UInt8] = []

        mutating func tag(_ field: Int, _ wireType: UInt8) {
            rawVarint(UInt64(field) << 3 | UInt64(wireType))
        }

        mutating func rawVarint(_ value: UInt64) {
            var v = value
            while v >= 0x80 {
                bytes.append(UInt8(v & 0x7F) | 0x80)
                v >>= 7
            }
            bytes.append(UInt8(v))
        }

        mutating func varint(_ field: Int, _ value: UInt64, always: Bool = false) {
            guard value != 0 || always else { return }
            tag(field, 0)
            rawVarint(value)
        }

        mutating func fixed64(_ field: Int, _ value: UInt64, always: Bool = false) {
            guard value != 0 || always else { return }
            tag(field, 1)
            for i in 0..<8 { bytes.append(UInt8(truncatingIfNeeded: value >> (8 * UInt64(i)))) }
        }

        mutating func message(_ field: Int, _ payload: [UInt8], always: Bool = true) {
            guard !payload.isEmpty || always else { return }
            tag(field, 2)
            rawVarint(UInt64(payload.count))
            bytes += payload
        }

        mutating func string(_ field: Int, _ s: String, always: Bool = false) {
            let utf8 = Array(s.utf8)
            guard !utf8.isEmpty || always else { return }
            message(field, utf8)
        }
    }
}
