import CSignalShim
import Foundation
import Synchronization
import Testing

/// Start's delivery thread names itself with one prctl (aft_set_thread_name): the kernel keeps
/// 15 bytes, and the crash path knows Aftermath's threads by that name.
@Suite("Thread names")
struct ThreadNameTests {
    @Test("A thread's name is set whole, or cut to the kernel's 15 bytes")
    func namesTheCallingThread() {
        let seen = Mutex<[String]>([])
        let thread = Thread {
            for name in ["aftermath.deliver", "short", ""] {
                aft_set_thread_name(name)
                let comm = (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? "?"
                seen.withLock { $0.append(comm.trimmingCharacters(in: .newlines)) }
            }
        }
        thread.start()
        for _ in 0..<200 where seen.withLock({ $0.count }) < 3 { usleep(5_000) }
        #expect(seen.withLock { $0 } == ["aftermath.deliv", "short", ""])
    }
}
