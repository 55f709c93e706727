/// The columns of a harness's results table, in order, after the scenario's name.
package protocol TableColumn: RawRepresentable<String>, CaseIterable, Sendable, Equatable {}

/// One cell of a results table: what it shows and whether it passed (nil: not applicable).
package struct TableCheck<Column: TableColumn>: Sendable {
    package var column: Column
    package var cell: String
    package var passed: Bool?
    /// Why it failed, for the list under the table.
    package var problem: String?

    package static func pass(_ column: Column, _ cell: String) -> TableCheck {
        TableCheck(column: column, cell: cell, passed: true)
    }

    package static func fail(_ column: Column, _ cell: String, _ problem: String) -> TableCheck {
        TableCheck(column: column, cell: cell, passed: false, problem: problem)
    }

    package static func skip(_ column: Column, _ cell: String = "-") -> TableCheck {
        TableCheck(column: column, cell: cell, passed: nil)
    }
}

/// One row of a results table.
package struct TableRow<Column: TableColumn>: Sendable {
    package var scenario: String
    package var checks: [TableCheck<Column>]
    package var milliseconds: Int

    package init(scenario: String, checks: [TableCheck<Column>], milliseconds: Int) {
        self.scenario = scenario
        self.checks = checks
        self.milliseconds = milliseconds
    }

    package var passed: Bool { checks.allSatisfy { $0.passed != false } }
}

/// Renders results as a plain-text table, then the failures, then the summary line.
package enum Table {
    package static func render<C>(_ rows: [TableRow<C>]) -> String {
        let header = ["scenario"] + C.allCases.map(\.rawValue) + ["ms", "result"]
        let body = rows.map { row in
            [row.scenario] + C.allCases.map { column in
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

    package static func failures<C>(_ rows: [TableRow<C>]) -> [String] {
        rows.flatMap { row in
            row.checks.compactMap { check in
                check.passed == false ? "\(row.scenario): \(check.column.rawValue): \(check.problem ?? check.cell)" : nil
            }
        }
    }

    /// The closing line; extra holds checks outside the table (true = passed).
    package static func summary<C>(_ rows: [TableRow<C>], extra: [Bool] = []) -> String {
        let failed = rows.filter { !$0.passed }.count + extra.filter { !$0 }.count
        return "\(rows.count + extra.count - failed) passed, \(failed) failed"
    }
}

extension String {
    package func padded(to length: Int) -> String {
        count >= length ? self : self + String(repeating: " ", count: length - count)
    }

    package func trimmingTrailingSpaces() -> String {
        var s = self
        while s.last == " " { s.removeLast() }
        return s
    }
}
