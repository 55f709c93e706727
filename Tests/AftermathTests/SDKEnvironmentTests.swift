import CSignalShim
import Foundation
import Testing
import Aftermath
import AftermathNextLaunch
import AftermathOTLP
import AftermathTesting
import TestSupport

/// The SDK-wide OpenTelemetry variables (OTEL_SDK_DISABLED, OTEL_RESOURCE_ATTRIBUTES,
/// OTEL_SERVICE_NAME) and what the app can see of deliveries.
@Suite("SDK environment and delivery visibility")
struct SDKEnvironmentTests {
    #if compiler(>=6.2)  // exit tests (#expect(processExitsWith:)) need Swift 6.2
    @Test("OTEL_SDK_DISABLED=true: start returns without installing a handler or creating a file")
    func disabled() async throws {
        let directory: String = TestSupport.childDirectory("disabled")
        await #expect(processExitsWith: .success) { [directory = directory as String] in
            setenv("OTEL_SDK_DISABLED", "true", 1)
            var before = sigaction(), after = sigaction()
            sigaction(SIGSEGV, nil, &before)
            let config = Aftermath.Configuration(
                serviceName: "off", serviceVersion: "1", exporter: InMemoryExporter(),
                reportsDirectory: directory, deliverPendingReportsSynchronously: true)
            do { try Aftermath.start(config) } catch { exit(2) }
            sigaction(SIGSEGV, nil, &after)
            guard !FileManager.default.fileExists(atPath: directory) else { exit(3) }
            guard Aftermath.sessionID == nil, Aftermath.lastDelivery == nil else { exit(4) }
            guard
                unsafeBitCast(before.__sigaction_handler, to: UInt.self)
                    == unsafeBitCast(after.__sigaction_handler, to: UInt.self)
            else { exit(5) }
            exit(0)
        }
    }

    @Test("The process's OTEL_ variables reach the records' resource; the start's delivery reads no others")
    func processVariables() async throws {
        let directory: String = TestSupport.childDirectory("otel-env")
        await #expect(processExitsWith: .success) { [directory = directory as String] in
            setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=staging,team=pay%3Dments", 1)
            setenv("OTEL_SERVICE_NAME", "from-env", 1)
            setenv("NOT_OTEL_RESOURCE_ATTRIBUTES", "x=y", 1)
            let env = OTelEnvironment.current()
            guard env.variables.keys.allSatisfy({ $0.hasPrefix("OTEL_") }),
                env["OTEL_SERVICE_NAME"] == "from-env"
            else { exit(2) }
            let config = Aftermath.Configuration(
                serviceName: "", serviceVersion: "1", exporter: InMemoryExporter(),
                reportsDirectory: directory, deliverPendingReportsSynchronously: true)
            do { try Aftermath.start(config) } catch { exit(3) }
            let resource = Aftermath.resource(for: config, environment: OTelEnvironment.current())
            let attributes = Dictionary(resource.attributes.map { ($0.key, $0.value) }) { a, _ in a }
            guard attributes["service.name"] == .string("from-env"),
                attributes["deployment.environment"] == .string("staging"),
                attributes["team"] == .string("pay=ments"), attributes["x"] == nil
            else { exit(4) }
            exit(0)
        }
    }

    @Test("lastDelivery: the app sees a failed delivery's error, then the delivery that sent the report")
    func lastDelivery() async throws {
        let directory: String = TestSupport.childDirectory("last-delivery")
        let dir = ReportDirectory(root: directory)
        try dir.prepare()
        try TestSupport.write(try TestSupport.fixture("v1/sigsegv-null-depth12.crash"), to: dir.crashes + "/a.crash")
        await #expect(processExitsWith: .success) { [directory = directory as String] in
            let exporter = InMemoryExporter()
            exporter.failNext(1)
            let config = Aftermath.Configuration(
                serviceName: "seen", serviceVersion: "1", exporter: exporter,
                reportsDirectory: directory, deliverPendingReportsSynchronously: true)
            do { try Aftermath.start(config) } catch { exit(2) }
            guard let failed = Aftermath.lastDelivery, failed.exported == 0, failed.exportError != nil else { exit(3) }
            Aftermath.deliverPendingReports()
            guard let sent = Aftermath.lastDelivery, sent.exported == 1, sent.exportError == nil else { exit(4) }
            exit(0)
        }
    }
    #endif

    @Test(
        "Resource: OTEL_RESOURCE_ATTRIBUTES adds attributes, Aftermath's own win; OTEL_SERVICE_NAME only without one in code"
    )
    func resource() {
        let env = OTelEnvironment([
            "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=prod,service.version=9,service.name=x",
            "OTEL_SERVICE_NAME": "env-name",
        ])
        var config = Aftermath.Configuration(
            serviceName: "shop", serviceVersion: "4.12.0", exporter: InMemoryExporter(),
            reportsDirectory: "/tmp/unused")
        var r = Aftermath.resource(for: config, environment: env).attributes
        #expect(r.first { $0.key == "deployment.environment" }?.value == "prod")
        #expect(r.first { $0.key == "service.version" }?.value == "4.12.0")
        #expect(r.filter { $0.key == "service.name" }.map(\.value) == ["shop"])
        config.serviceName = ""
        r = Aftermath.resource(for: config, environment: env).attributes
        #expect(r.filter { $0.key == "service.name" }.map(\.value) == ["env-name"])
        r = Aftermath.resource(for: config, environment: OTelEnvironment([:])).attributes
        #expect(r.filter { $0.key == "service.name" }.map(\.value) == ["unknown_service"])
    }
}

extension SDKEnvironmentTests {
    struct Boom: Error {}

    #if compiler(>=6.2)  // exit tests (#expect(processExitsWith:)) need Swift 6.2
    @Test("Handled errors dropped at maxPendingErrors are counted in the next acknowledged batch, once")
    func droppedErrorsCounted() async throws {
        let directory: String = TestSupport.childDirectory("dropped")
        await #expect(processExitsWith: .success) { [directory = directory as String] in
            let exporter = InMemoryExporter()
            var config = Aftermath.Configuration(
                serviceName: "drops", serviceVersion: "1", exporter: exporter,
                reportsDirectory: directory, deliverPendingReportsSynchronously: true)
            config.maxPendingErrors = 2
            do { try Aftermath.start(config) } catch { exit(2) }
            for _ in 0..<5 { Aftermath.record(error: SDKEnvironmentTests.Boom()) }
            func drops() -> [Int64] {
                exporter.records.filter { $0.eventName == "apsio.records_dropped" }.compactMap {
                    $0[attribute: "apsio.dropped.count"]?.intValue
                }
            }
            exporter.failNext(1)
            Aftermath.deliverPendingReports()
            guard drops().isEmpty else { exit(3) }
            Aftermath.deliverPendingReports()
            guard drops() == [3] else { exit(4) }
            Aftermath.record(error: SDKEnvironmentTests.Boom())
            Aftermath.deliverPendingReports()
            guard drops() == [3] else { exit(5) }
            exit(0)
        }
    }
    #endif
}

/// The pool's priorities as the app sets and reads them.
@Suite("Concurrency pool priorities in the configuration")
struct PoolPriorityConfigurationTests {
    @Test("The default is .medium; what the app sets reads back, order and repeats kept")
    func roundTrip() {
        var config = Aftermath.Configuration(serviceName: "p", serviceVersion: "1", exporter: InMemoryExporter())
        #expect(config.concurrencyPoolPriorities == [.medium])
        config.concurrencyPoolPriorities = [.high, .background, .high, TaskPriority(rawValue: 7)]
        #expect(config.concurrencyPoolPriorities == [.high, .background, .high, TaskPriority(rawValue: 7)])
        config.concurrencyPoolPriorities = []
        #expect(config.concurrencyPoolPriorities.isEmpty)
    }
}
