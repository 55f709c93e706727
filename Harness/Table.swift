/// One row of the results table.
struct Row: Sendable {
    var scenario: String
    var checks: [CheckResult]
    var milliseconds: Int

    var passed: Bool { checks.allSatisfy { $0.passed != false } }
}

/// Renders the results as a plain-text table, then the failures, then the summary line.
enum Table {
    static func render(_ rows: [Row]) -> String {
        let header = ["scenario"] + Column.allCases.map(\.rawValue) + ["ms", "result"]
        let body = rows.map { row in
            [row.scenario] + Column.allCases.map { column in
                row.checks.first { $0.column == column }?.cell ?? "-"
            } + ["\(row.milliseconds)", row.passed ? "PASS" : "FAIL"]
        }
        let widths = header.indices.map { i in ([header] + body).map { $0[i].count }.max() ?? 0 }
        func line(_ cells: [String]) -> String {
            zip(cells, widths).map { $0.padded(to: $1) }
                .joined(separator: " | ")
                .trimmingTrailingSpaces()
        }
        var out = [line(header), widths.map { String(repeating: "-", count: $0) }.joined(separator: "-+-")]
        out += body.map(line)
        return out.joined(separator: "\n")
    }

    static func failures(_ rows: [Row]) -> [String] {
        rows.flatMap { row in
            row.checks.compactMap { check in
                check.passed == false ? "\(row.scenario): \(check.column.rawValue): \(check.problem ?? check.cell)" : nil
            }
        }
    }

    /// The closing line; extra holds checks outside the table (true = passed).
    static func summary(_ rows: [Row], extra: [Bool] = []) -> String {
        let failed = rows.filter { !$0.passed }.count + extra.filter { !$0 }.count
        return "\(rows.count + extra.count - failed) passed, \(failed) failed"
    }
}

extension String {
    func padded(to length: Int) -> String {
        count >= length ? self : self + String(repeating: " ", count: length - count)
    }

    func trimmingTrailingSpaces() -> String {
        var s = self
        while s.last == " " { s.removeLast() }
        return s
    }
}
