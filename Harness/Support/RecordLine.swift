import AftermathOTLP

/// How harness children report the records their launch exported, on stdout:
/// `RECORD <OTLP/JSON ExportLogsServiceRequest of one batch>`, one line per batch (OTLP/JSON
/// escapes newlines inside strings, so a batch is one line). Parents decode the lines with
/// ``OTLPJSON/decode(_:)``.
package enum RecordLine {
    package static let prefix = "RECORD "

    package static func line(_ batch: LogBatch) -> String {
        prefix + OTLPJSON.encodeString(batch)
    }

    /// Writes one RECORD line per batch to stdout at once (no buffer: the process may end next).
    package static func emit(_ batches: [LogBatch]) {
        for batch in batches { writeNow(line(batch) + "\n") }
    }

    /// The records of the RECORD lines among lines, in order, and the lines that did not decode.
    package static func records(in lines: [String]) -> (records: [LogRecord], problems: [String]) {
        var records: [LogRecord] = [], problems: [String] = []
        for line in lines where line.hasPrefix(prefix) {
            do {
                records += try OTLPJSON.decode(Array(line.utf8.dropFirst(prefix.utf8.count))).records
            } catch {
                problems.append("RECORD line \(records.count + problems.count + 1): \(error)")
            }
        }
        return (records, problems)
    }
}

extension ChildResult {
    /// The records this child reported on its RECORD lines.
    package var records: [LogRecord] { RecordLine.records(in: lines).records }
}

extension ChildProcess {
    /// The records this child reported on its RECORD lines so far.
    package var records: [LogRecord] { RecordLine.records(in: lines).records }
}

extension LogRecord {
    /// An attribute's value as text: strings as they are, integers in decimal, booleans as
    /// `true`/`false`, doubles as Swift prints them; nil when absent (or an array or map).
    package subscript(text key: String) -> String? {
        switch self[attribute: key] {
        case .string(let value)?: value
        case .int(let value)?: String(value)
        case .bool(let value)?: String(value)
        case .double(let value)?: String(value)
        default: nil
        }
    }
}
