import Foundation
import CSignalShim

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// What `start` needs done quickly: random ids without opening /dev/urandom, and a thread
/// without Foundation's set-up.
enum StartHelpers {
    /// A version-4 UUID from the system's generator (getrandom(2): no file to open).
    static func randomUUID() -> UUID { randomUUIDs3().0 }

    /// Three version-4 UUIDs from one getrandom(2) call (the system's generator, 8 bytes a call,
    /// took six): start makes its ids with it.
    static func randomUUIDs3() -> (UUID, UUID, UUID) {
        var bytes = (
            UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0)
        )
        withUnsafeMutableBytes(of: &bytes) { raw in
            guard aft_random_bytes(raw.baseAddress, raw.count) != 0 else { return }
            // No getrandom(2) (a kernel before 3.17): the generator, which falls back to a file.
            var generator = SystemRandomNumberGenerator()
            for i in raw.indices { raw[i] = generator.next() }
        }
        func uuid(_ a: UInt64, _ b: UInt64) -> UUID {
            var u: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
            withUnsafeMutableBytes(of: &u) { raw in
                raw.storeBytes(of: a, toByteOffset: 0, as: UInt64.self)
                raw.storeBytes(of: b, toByteOffset: 8, as: UInt64.self)
                raw[6] = (raw[6] & 0x0F) | 0x40  // version 4
                raw[8] = (raw[8] & 0x3F) | 0x80  // RFC 4122 variant
            }
            return UUID(uuid: u)
        }
        return (uuid(bytes.0, bytes.1), uuid(bytes.2, bytes.3), uuid(bytes.4, bytes.5))
    }

    /// Calls body with a zeroed 256-byte buffer for a C call's error message and its capacity;
    /// body's result and the message ("" when none). The buffer is on the stack: start's first
    /// array (of a type the standard library prespecializes) has the runtime register every such
    /// prespecialization, about 60 µs once a process, which an app that makes none never pays.
    static func withErrorMessage<R>(_ body: (UnsafeMutablePointer<CChar>, Int) -> R) -> (result: R, message: String) {
        withUnsafeTemporaryAllocation(of: CChar.self, capacity: 256) { buffer in
            buffer.initialize(repeating: 0)
            let result = body(buffer.baseAddress!, buffer.count - 1)
            return (result, String(cString: buffer.baseAddress!))
        }
    }

    /// Runs body on a new detached thread named name (at most 15 bytes show), then `then` once
    /// body's frames are gone; false when no thread could be made.
    @discardableResult
    static func detachedThread(
        named name: String, _ body: @escaping @Sendable () -> Void, then: (@Sendable () -> Void)? = nil
    ) -> Bool {
        final class Box: @unchecked Sendable {  // handed to the new thread once, then released
            let name: String
            let body: @Sendable () -> Void
            let then: (@Sendable () -> Void)?
            init(name: String, body: @escaping @Sendable () -> Void, then: (@Sendable () -> Void)?) {
                self.name = name
                self.body = body
                self.then = then
            }
        }
        let box = Unmanaged.passRetained(Box(name: name, body: body, then: then)).toOpaque()
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
        // A stack of its own, unmapped whole by the run record's updater once the thread has
        // ended (glibc would keep one it made cached, with every page the thread touched). On
        // glibc's when it cannot be had.
        let ownStack = aft_own_stack_attributes(&attributes) == 0
        var thread = pthread_t()
        let status = pthread_create(
            &thread, &attributes,
            { argument in
                let box = Unmanaged<Box>.fromOpaque(argument!).takeRetainedValue()
                aft_set_thread_name(box.name)
                box.body()
                box.then?()
                // Where the stack is glibc's, it keeps it for a later thread with every page
                // the body touched: the pages below this frame go back to the system.
                _ = aft_release_thread_stack_below()
                return nil
            }, box)
        if status != 0 {
            Unmanaged<Box>.fromOpaque(box).release()
            if ownStack { aft_own_stack_unused() }
        }
        return status == 0
    }
}
