import Aftermath
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
#if canImport(Glibc)
import Glibc
#endif

// nio-server <reports dir> <outbox dir>: an HTTP server on 127.0.0.1 (its port on stdout as
// "READY <port>") as a SwiftNIO user writes one, with Aftermath started first, its records
// written to <outbox dir> by FileExporter, each event loop watched. Routes:
//   /             "ok"
//   /block?ms=N   blocks its event loop for N ms (in nioHarnessBlockingHandler), then answers
//   /pool?ms=N    answers at once; as many Tasks as the pool is wide block N ms each, three
//                 awaits deep (in nioHarnessPoolBlock)
//   /crash?ms=N   a handler's bug: an array of N elements indexed at N (a Swift runtime trap,
//                 in nioHarnessCrashingHandler) on its event loop; the server dies of it
// The main thread parks in closeFuture.wait(), as servers do.
// With NIO_HARNESS_SPARE_GROUPS=N in the environment it also runs, after READY, N short-lived
// groups of 4 loops one after the other, as a client library does: each loop watched, used,
// then the group shut down without stopping the watches. "SPARE DONE <failures>" ends them.

/// Blocks the calling thread (an event loop) in a semaphore for `ms` milliseconds.
@inline(never)
func nioHarnessBlockingHandler(_ ms: Int) {
    _ = DispatchSemaphore(value: 0).wait(timeout: .now() + .milliseconds(ms))
    withExtendedLifetime(ms) {}
}

/// A Task's synchronous wait: its pool thread is held. Its body differs from
/// nioHarnessBlockingHandler's (a semaphore per call, signalled after the wait), so that an
/// optimized build does not merge the two into one function of either name.
@inline(never)
func nioHarnessPoolBlock(_ ms: Int) {
    let semaphore = DispatchSemaphore(value: 0)
    if semaphore.wait(timeout: .now() + .milliseconds(ms)) == .timedOut { semaphore.signal() }
    withExtendedLifetime(semaphore) {}
}

@inline(never)
func nioHarnessLevel1(_ ms: Int) async {
    await Task.yield()
    await nioHarnessLevel2(ms)
}

@inline(never)
func nioHarnessLevel2(_ ms: Int) async {
    await Task.yield()
    await nioHarnessLevel3(ms)
}

@inline(never)
func nioHarnessLevel3(_ ms: Int) async {
    await Task.yield()
    nioHarnessPoolBlock(ms)
}

/// Reads one element past the end of an array of `count`: Swift traps (index out of range).
@inline(never)
func nioHarnessCrashingHandler(_ count: Int) -> Int {
    let values = [Int](repeating: 7, count: count)
    return values[count]
}

func route(_ uri: String) -> String {
    let parts = uri.split(separator: "?", maxSplits: 1)
    let path = parts.first.map(String.init) ?? "/"
    let ms = parts.count > 1 && parts[1].hasPrefix("ms=") ? Int(parts[1].dropFirst(3)) ?? 0 : 0
    switch path {
    case "/block":
        nioHarnessBlockingHandler(ms)
        return "blocked \(ms) ms\n"
    case "/pool":
        let width = max(1, sysconf(Int32(_SC_NPROCESSORS_CONF)))
        for _ in 0..<width { Task.detached { await nioHarnessLevel1(ms) } }
        return "pool \(width) x \(ms) ms\n"
    case "/crash":
        return "never \(nioHarnessCrashingHandler(ms))\n"
    default:
        return "ok\n"
    }
}

final class HTTPHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart
    private var uri = "/"

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            uri = head.uri
        case .body:
            break
        case .end:
            let body = route(uri)
            var headers = HTTPHeaders()
            headers.add(name: "content-length", value: String(body.utf8.count))
            headers.add(name: "connection", value: "close")
            context.write(
                wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))), promise: nil
            )
            var buffer = context.channel.allocator.buffer(capacity: body.utf8.count)
            buffer.writeString(body)
            context.write(wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
            let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
            context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in bound.value.close(promise: nil) }
        }
    }
}

/// Groups that come and go (NIO_HARNESS_SPARE_GROUPS): their loops watched and never unwatched.
func runSpareGroups(_ count: Int) {
    var failures = 0
    for round in 0..<count {
        let spare = MultiThreadedEventLoopGroup(numberOfThreads: 4)
        for (i, loop) in spare.makeIterator().enumerated() {
            do {
                try Aftermath.watchEventLoop(named: "spare-\(round)-\(i)") { loop.execute($0) }
            } catch {
                FileHandle.standardOutput.write(Data("SPARE WATCH FAILED \(round) \(error)\n".utf8))
                failures += 1
            }
            _ = try? loop.submit {}.wait()
        }
        usleep(300_000)
        try? spare.syncShutdownGracefully()
        usleep(300_000)
    }
    FileHandle.standardOutput.write(Data("SPARE DONE \(failures)\n".utf8))
}

let arguments = CommandLine.arguments
guard arguments.count >= 3 else {
    FileHandle.standardError.write(Data("usage: nio-server <reports dir> <outbox dir>\n".utf8))
    exit(2)
}
let config = Aftermath.Configuration(
    serviceName: "nio-server", serviceVersion: "1.0", exporter: FileExporter(directory: arguments[2]),
    reportsDirectory: arguments[1])
try Aftermath.start(config)

let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
for (i, loop) in group.makeIterator().enumerated() {
    try Aftermath.watchEventLoop(named: "loop-\(i)") { loop.execute($0) }
}
let channel = try ServerBootstrap(group: group)
    .serverChannelOption(.backlog, value: 64)
    .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
    .childChannelInitializer { channel in
        channel.eventLoop.makeCompletedFuture {
            try channel.pipeline.syncOperations.configureHTTPServerPipeline()
            try channel.pipeline.syncOperations.addHandler(HTTPHandler())
        }
    }
    .bind(host: "127.0.0.1", port: 0).wait()
FileHandle.standardOutput.write(Data("READY \(channel.localAddress?.port ?? 0)\n".utf8))
if let spare = ProcessInfo.processInfo.environment["NIO_HARNESS_SPARE_GROUPS"].flatMap(Int.init) {
    Thread.detachNewThread { runSpareGroups(spare) }
}
try channel.closeFuture.wait()
