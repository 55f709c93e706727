/// An OpenTelemetry log severity (`SeverityNumber`, 1...24; 0 is unspecified).
public struct SeverityNumber: RawRepresentable, Sendable, Hashable {
    /// The numeric severity, written as an integer in OTLP/JSON.
    public var rawValue: Int32

    /// Creates a severity from its number.
    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// TRACE (1).
    public static let trace = SeverityNumber(rawValue: 1)
    /// DEBUG (5).
    public static let debug = SeverityNumber(rawValue: 5)
    /// INFO (9).
    public static let info = SeverityNumber(rawValue: 9)
    /// WARN (13).
    public static let warn = SeverityNumber(rawValue: 13)
    /// ERROR (17): handled errors and hangs.
    public static let error = SeverityNumber(rawValue: 17)
    /// FATAL (21): crashes and abnormal exits.
    public static let fatal = SeverityNumber(rawValue: 21)

    /// The OpenTelemetry short name: `"INFO"`, `"WARN"`, `"ERROR"`, `"FATAL"`, with a suffix
    /// inside a range (`"ERROR2"` for 18); `""` for 0 and numbers outside 1...24.
    public var text: String {
        guard (1...24).contains(rawValue) else { return "" }
        let names = ["TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL"]
        let offset = (rawValue - 1) % 4
        let name = names[Int(rawValue - 1) / 4]
        return offset == 0 ? name : "\(name)\(offset + 1)"
    }
}
