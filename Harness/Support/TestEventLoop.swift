import CHarnessFaults

/// An event loop built as SwiftNIO's (Harness/CFaults/event_loop.c), for the hang rows and the
/// benchmark: a named thread in epoll_wait that runs the jobs `execute` queues.
package struct TestEventLoop: Sendable {
    package let loop: Int32

    /// Starts a loop thread named `name` (at most 15 bytes); nil when it could not start.
    package init?(named name: String) {
        loop = aft_test_loop_start(name)
        if loop < 0 { return nil }
    }

    /// A Swift closure as a C job's context.
    private final class Job: @unchecked Sendable {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }

    /// Queues `body` on the loop and wakes it.
    package func execute(_ body: @escaping @Sendable () -> Void) {
        let context = Unmanaged.passRetained(Job(body)).toOpaque()
        let status = aft_test_loop_execute(
            loop,
            { context in Unmanaged<Job>.fromOpaque(context!).takeRetainedValue().body() },
            context)
        if status != 0 { Unmanaged<Job>.fromOpaque(context).release() }
    }

    /// The loop thread's kernel tid.
    package var tid: UInt64 { aft_test_loop_tid(loop) }
    /// How often its epoll_wait returned.
    package var wakeups: UInt64 { aft_test_loop_wakeups(loop) }
    /// Jobs it ran.
    package var ran: UInt64 { aft_test_loop_ran(loop) }
    /// Jobs given to it after its shutdown, refused (SwiftNIO prints an error for each, or
    /// traps in strict mode).
    package var late: UInt64 { aft_test_loop_late(loop) }

    /// Shuts the loop down as a group's shutdown does: returns once its thread has ended.
    package func shutDown() { _ = aft_test_loop_shutdown(loop) }
}
