// swift-format-ignore-file
// (The line numbers of this fixture are what the symbolication tests check.)
// A program that traps the way optimized Swift code does (the symbolication tests build it with
// swiftc -O -g). Prints the trap address and its executable's load address on stderr, then
// dies from the signal.
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

@inline(never) func opaque<T>(_ value: T) -> T { value }

@inline(never) func forceUnwrap(_ text: String?) -> Int { opaque(text)!.count }
@inline(never) func index(_ values: [Int], _ i: Int) -> Int { values[opaque(i)] }
@inline(never) func overflow(_ a: Int) -> Int { opaque(a) + Int.max }
@inline(never) func precondition(_ a: Int) -> Int { Swift.precondition(opaque(a) > 10, "too small"); return a }

func report(_ signal: Int32, _ info: UnsafeMutablePointer<siginfo_t>?, _ context: UnsafeMutableRawPointer?) {
    let pc = UInt(bitPattern: info?.pointee._sifields._sigfault.si_addr)
    var line = "trap pc=0x\(String(pc, radix: 16)) base=0x\(loadAddress)\n"
    line.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
    signal_(signal)
}
func signal_(_ s: Int32) { Glibc.signal(s, SIG_DFL); raise(s) }

/// The start of the executable's lowest mapping, from /proc/self/maps (hex, no prefix).
func executableLoadAddress() -> String {
    var buffer = [CChar](repeating: 0, count: 4096)
    let n = readlink("/proc/self/exe", &buffer, buffer.count - 1)
    let exe = n > 0 ? String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self) : ""
    guard let file = fopen("/proc/self/maps", "r") else { return "0" }
    defer { fclose(file) }
    var line = [CChar](repeating: 0, count: 8192)
    while fgets(&line, Int32(line.count), file) != nil {
        let text = String(cString: line).trimmingSuffix()
        if text.hasSuffix(" " + exe), let dash = text.firstIndex(of: "-") { return String(text[..<dash]) }
    }
    return "0"
}
extension String {
    func trimmingSuffix() -> String { hasSuffix("\n") ? String(dropLast()) : self }
}
let loadAddress = executableLoadAddress()

var action = sigaction()
action.__sigaction_handler.sa_sigaction = { report($0, $1, $2) }
action.sa_flags = Int32(SA_SIGINFO) | Int32(bitPattern: UInt32(SA_RESETHAND))
_ = sigaction(SIGILL, &action, nil)
_ = sigaction(SIGTRAP, &action, nil)

let which = CommandLine.arguments.dropFirst().first ?? "force-unwrap"
switch which {
case "force-unwrap": print(forceUnwrap(nil))
case "index-out-of-range": print(index([1, 2, 3], 7))
case "arithmetic-overflow": print(overflow(1))
case "precondition": print(precondition(1))
default: print("unknown \(which)")
}
