#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Values the optimizer cannot know at compile time.
///
/// A fault the compiler can prove (a load from a constant null pointer, a constant index out of
/// range) may be folded into a trap or removed under `-O`. Routing the inputs of every fault
/// through the environment, which the harness never sets, keeps each fault a real one.
enum Opaque {
    /// `value`, laundered through a run-time condition (the variable is never set).
    @inline(never)
    static func value(_ value: Int) -> Int {
        getenv("CRASH_HARNESS_NEVER_SET") == nil ? value : value &+ 1
    }
}
