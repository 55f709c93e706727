import AftermathOTLP
#if canImport(Glibc)
import Glibc
#endif
/// The SDK's own names, as records and resources carry them.
package enum SDK {
    /// telemetry.sdk.version and the instrumentation scope's version.
    package static let version = "0.1.0"
    /// The instrumentation scope name of the records.
    package static let scopeName = "dev.apsio.aftermath"
}

extension SDK {
    /// The resource attributes Aftermath sends: the reporting process's service, SDK and OS.
    package static func resource(serviceName: String, serviceVersion: String, os: OSInfo = .current()) -> Resource {
        return Resource(attributes: [
            Attribute("service.name", .string(serviceName)),
            Attribute("service.version", .string(serviceVersion)),
            Attribute("telemetry.sdk.name", "aftermath"),
            Attribute("telemetry.sdk.language", "swift"),
            Attribute("telemetry.sdk.version", .string(version)),
            Attribute("os.type", "linux"),
            Attribute("os.name", .string(os.name)),
            Attribute("os.version", .string(os.version)),
            Attribute("host.arch", .string(Architecture.current == .x86_64 ? "amd64" : "arm64")),
            Attribute("process.pid", .int(Int64(getpid()))),
        ])
    }
}
