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
        if let found = try? records(inDocument: Array(data)) { return found }
        // JSON lines: one request (or record) a line, as the collector's file exporter writes.
        var result: [(LogRecord, String?)] = []
        var lineNumber = 0
        for line in data.split(separator: UInt8(ascii: "\n")) {
            lineNumber += 1
            guard line.contains(where: { !($0 == 32 || $0 == 9 || $0 == 13) }) else { continue }
            guard let found = try? records(inDocument: Array(line)) else {
                throw Failure(description: "line \(lineNumber) is neither an OTLP/JSON logs request nor a log record")
            }
            result += found
        }
        guard lineNumber > 0 else { throw Failure(description: "empty input") }
        return result
    }

    /// One JSON document: an export request, else a single log record.
    private static func records(inDocument bytes: [UInt8]) throws -> [(record: LogRecord, serviceName: String?)] {
        if let batches = try? OTLPJSON.decodeBatches(bytes) {
            return batches.flatMap { batch in
                let service = batch.resource.attributes.first { $0.key == "service.name" }?.value.stringValue
                return batch.records.map { ($0, service) }
            }
        }
        return [(try OTLPJSON.decodeRecord(bytes), nil)]
    }
}
