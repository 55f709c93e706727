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
    /// Why the row was not run (its checks then only describe it).
    package var skipReason: String?

    package init(scenario: String, checks: [TableCheck<Column>], milliseconds: Int, skipReason: String? = nil) {
        self.scenario = scenario
        self.checks = checks
        self.milliseconds = milliseconds
        self.skipReason = skipReason
    }

    package var passed: Bool { skipReason == nil && checks.allSatisfy { $0.passed != false } }
    package var failed: Bool { skipReason == nil && !passed }
    package var verdict: String { skipReason != nil ? "SKIPPED" : passed ? "PASS" : "FAIL" }
}

/// Renders results as a plain-text table, then the failures and skips, then the closing line
/// `N passed, N failed` (`, N skipped` when a row was skipped).
package enum Table {
    package static func render<C>(_ rows: [TableRow<C>]) -> String {
        let header = ["scenario"] + C.allCases.map(\.rawValue) + ["ms", "result"]
        let body = rows.map { row in
            [row.scenario]
                + C.allCases.map { column in
                    row.checks.first { $0.column == column }?.cell ?? "-"
                } + ["\(row.milliseconds)", row.verdict]
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
        rows.filter(\.failed).flatMap { row in
            row.checks.compactMap { check in
                check.passed == false
                    ? "\(row.scenario): \(check.column.rawValue): \(check.problem ?? check.cell)" : nil
            }
        }
    }

    package static func skips<C>(_ rows: [TableRow<C>]) -> [String] {
        rows.compactMap { row in row.skipReason.map { "\(row.scenario): \($0)" } }
    }

    /// The closing line; extra holds checks outside the table (true = passed, nil = skipped).
    package static func summary<C>(_ rows: [TableRow<C>], extra: [Bool?] = []) -> String {
        let passed = rows.filter(\.passed).count + extra.filter { $0 == true }.count
        let failed = rows.filter(\.failed).count + extra.filter { $0 == false }.count
        let skipped = rows.filter { $0.skipReason != nil }.count + extra.filter { $0 == nil }.count
        return "\(passed) passed, \(failed) failed" + (skipped > 0 ? ", \(skipped) skipped" : "")
    }

    /// Prints the table, the failures and the skips; `between` comes before the closing line.
    /// Returns the harness's exit status: 1 when a row or an extra check failed.
    package static func print<C>(_ rows: [TableRow<C>], extra: [Bool?] = [], between: [String] = []) -> Int32 {
        var out = [render(rows)]
        let failures = failures(rows), skips = skips(rows)
        if !failures.isEmpty { out += ["", "Failures:"] + failures.map { "  " + $0 } }
        if !skips.isEmpty { out += ["", "Skipped:"] + skips.map { "  " + $0 } }
        if !between.isEmpty { out += [""] + between }
        out.append(summary(rows, extra: extra))
        Swift.print(out.joined(separator: "\n"))
        return rows.contains(where: \.failed) || extra.contains(false) ? 1 : 0
    }

    /// A progress line on stderr: `<harness>: <scenario>…`.
    package static func progress(_ harness: String, _ scenario: String) {
        writeNow("\(harness): \(scenario)…\n", fd: 2)
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
