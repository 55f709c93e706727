import Foundation

extension OTLPHTTPExporter {
    /// The exporter's settings from the OpenTelemetry environment variables: the logs-specific
    /// variable wins over the general one, an unset or empty one gives the default. A value
    /// that cannot be used is a problem (every export throws it), never silently replaced.
    struct Settings {
        var endpoint = URL(string: "http://localhost:4318/v1/logs")!
        var encoding = Encoding.protobuf
        var gzip = false
        var timeout = Duration.seconds(10)
        var headers: [String: String] = [:]
        var certificateFile: String?
        var endpointProblem, encodingProblem, gzipProblem, timeoutProblem: String?

        init(_ env: OTelEnvironment) {
            func pick(_ name: String) -> (name: String, value: String)? {
                let logs = "OTEL_EXPORTER_OTLP_LOGS_" + name, general = "OTEL_EXPORTER_OTLP_" + name
                if let value = env[logs] { return (logs, value) }
                return env[general].map { (general, $0) }
            }
            if let value = env["OTEL_EXPORTER_OTLP_LOGS_ENDPOINT"] {
                // Used as is.
                if let url = Self.httpURL(value) {
                    endpoint = url
                } else {
                    endpointProblem = "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT=\(value) is not an http or https URL"
                }
            } else if let value = env["OTEL_EXPORTER_OTLP_ENDPOINT"] {
                // A base URL: the signal's path is appended to its path.
                if let url = Self.httpURL(value.hasSuffix("/") ? value + "v1/logs" : value + "/v1/logs") {
                    endpoint = url
                } else {
                    endpointProblem = "OTEL_EXPORTER_OTLP_ENDPOINT=\(value) is not an http or https URL"
                }
            }
            if let (name, value) = pick("PROTOCOL") {
                switch value {
                case "http/protobuf": encoding = .protobuf
                case "http/json": encoding = .json
                case "grpc":
                    encodingProblem =
                        "\(name)=grpc is not supported: this exporter speaks OTLP/HTTP (http/protobuf or http/json)"
                default: encodingProblem = "\(name)=\(value) is not a protocol: use http/protobuf or http/json"
                }
            }
            if let (name, value) = pick("COMPRESSION") {
                switch value.lowercased() {
                case "gzip": gzip = true
                case "none": gzip = false
                default: gzipProblem = "\(name)=\(value) is not a compression: use gzip or none"
                }
            }
            if let (name, value) = pick("TIMEOUT") {
                if let ms = Int64(value), ms > 0 {
                    timeout = .milliseconds(ms)
                } else {
                    timeoutProblem = "\(name)=\(value) is not a positive number of milliseconds"
                }
            }
            certificateFile = pick("CERTIFICATE")?.value
            if let (_, value) = pick("HEADERS") {
                for (key, value) in OTelEnvironment.keyValueList(value) { headers[key] = value }
            }
        }

        static func httpURL(_ text: String) -> URL? {
            guard let url = URL(string: text), let scheme = url.scheme?.lowercased(),
                ["http", "https"].contains(scheme),
                url.host != nil
            else { return nil }
            return url
        }
    }
}
