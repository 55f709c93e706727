import CSignalShim
import CHarnessFaults
import AftermathNextLaunch
import TestSupport
import Testing

/// The /proc parsers the watchdog's hang path uses, on crafted text.
@Suite("Hang /proc parsers")
struct HangProcParserTests {
    func call<R>(_ s: String, _ body: (UnsafePointer<CChar>, Int) -> R) -> R {
        s.withCString { body($0, s.utf8.count) }
    }

    @Test("stat: the state after the last ')' of a comm with spaces and parentheses")
    func statState() {
        #expect(
            call("4242 (my (odd) app) S 1 4242 4242 0 -1") { aft_proc_stat_state($0, $1) } == CChar(UInt8(ascii: "S")))
        #expect(call("4242 (a) D 1") { aft_proc_stat_state($0, $1) } == CChar(UInt8(ascii: "D")))
        #expect(call("garbage") { aft_proc_stat_state($0, $1) } == CChar(UInt8(ascii: "?")))
        #expect(call("") { aft_proc_stat_state($0, $1) } == CChar(UInt8(ascii: "?")))
    }

    @Test("syscall: in a call, blocked outside one, running, malformed")
    func syscall() {
        var nr: Int64 = 0, sp: UInt64 = 0, pc: UInt64 = 0
        #expect(
            call("202 0x7f0 0x80 0x0 0x0 0x0 0x0 0x7ffd1000 0x7f00aa\n") {
                aft_proc_syscall_parse($0, $1, &nr, &sp, &pc)
            } == 1)
        #expect(nr == 202 && sp == 0x7ffd1000 && pc == 0x7f00aa)
        #expect(call("-1 0x7ffd2000 0x401000\n") { aft_proc_syscall_parse($0, $1, &nr, &sp, &pc) } == 1)
        #expect(nr == -1 && sp == 0x7ffd2000 && pc == 0x401000)
        #expect(call("running\n") { aft_proc_syscall_parse($0, $1, &nr, &sp, &pc) } == 0)
        #expect(call("202 0x1 0x2") { aft_proc_syscall_parse($0, $1, &nr, &sp, &pc) } == 0)
        #expect(call("202 0xzz 0 0 0 0 0 0 0") { aft_proc_syscall_parse($0, $1, &nr, &sp, &pc) } == 0)
    }

    @Test("Sleeps and polls would be cut short by a handler; futex and read are restarted")
    func interrupted() {
        #if arch(x86_64)
        #expect(aft_syscall_interrupted_by_handler(230) == 1)  // clock_nanosleep
        #expect(aft_syscall_interrupted_by_handler(35) == 1)  // nanosleep
        #expect(aft_syscall_interrupted_by_handler(232) == 1)  // epoll_wait
        #expect(aft_syscall_interrupted_by_handler(202) == 0)  // futex
        #expect(aft_syscall_interrupted_by_handler(0) == 0)  // read
        #endif
        #expect(aft_syscall_interrupted_by_handler(-1) == 0)
    }

    @Test("status: TracerPid and the SigBlk mask")
    func status() {
        let text = "Name:\tapp\nTracerPid:\t812\nSigBlk:\t0000000000800000\nSigIgn:\t0000000000000000\n"
        #expect(call(text) { aft_proc_status_tracer($0, $1) } == 812)
        #expect(call(text) { aft_proc_status_blocks($0, $1, 24) } == 1)  // bit 23: signal 24
        #expect(call(text) { aft_proc_status_blocks($0, $1, 23) } == 0)
        #expect(call("Name:\tapp\n") { aft_proc_status_tracer($0, $1) } == 0)
        #expect(call("Name:\tapp\n") { aft_proc_status_blocks($0, $1, 23) } == -1)
        #expect(call("XTracerPid:\t5\n") { aft_proc_status_tracer($0, $1) } == 0)
    }
}
