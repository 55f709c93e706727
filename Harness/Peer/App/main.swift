// peer-app: Aftermath as an app starts it, in the modes of PeerRun (Harness/Peer/README.md).
import Aftermath
import CPeer
import Foundation
import PeerSupport

#if canImport(Glibc)
import Glibc
#endif

/// Acknowledges every record and attachment and keeps nothing: the counterpart of the C app's
/// discarding transport, so neither side pays for a real delivery.
final class DiscardExporter: LogExporter, AttachmentExporter {
    func export(_ batch: LogBatch) throws {}
    func export(_ attachment: Attachment) throws -> String? { attachment.id }
}

let arguments = PeerRun.arguments()
PeerRun.main(
    arguments,
    start: {
        // What each part of Aftermath costs: linked but not started, or started without
        // watching for hangs (no watchdog, pinger or pool probe), against the full start.
        if arguments.part == "linked" { return }
        var config = Aftermath.Configuration(
            serviceName: "peer", serviceVersion: "1.0", exporter: DiscardExporter(),
            reportsDirectory: arguments.directory, fsyncReports: arguments.fsync)
        // The handler mode also reads Aftermath's own figure (entry to committed file): a
        // benchmark-only hook, the one difference from an app's configuration.
        if arguments.mode == "handler" { config.handlerTimingFileDescriptor = cpeer_sdk_timing_fd() }
        if arguments.part == "nohang" {
            config.hangHeartbeat = .off
            config.hangOtherThreads = false
            config.watchConcurrencyPool = false
        }
        do { try Aftermath.start(config) } catch { exit(3) }
    },
    settled: { Aftermath.lastDelivery != nil })
