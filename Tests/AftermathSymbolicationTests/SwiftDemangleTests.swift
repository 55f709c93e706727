import Testing

import AftermathSymbolication
import AftermathNextLaunch
import TestSupport

@Suite("Swift demangling")
struct SwiftDemangleTests {
    @Test(
        "Known mangled names demangle",
        arguments: [
            ("$sSi", "Swift.Int"),
            ("$sSS", "Swift.String"),
            ("$sSaySiG", "Swift.Array<Swift.Int>"),
            ("$s4main3fooyyF", "main.foo() -> ()"),
        ])
    func demangles(mangled: String, expected: String) {
        #expect(SwiftDemangle.isSwiftSymbol(mangled))
        #expect(SwiftDemangle.demangle(mangled) == expected)
    }

    @Test(
        "Non-Swift names pass through unchanged",
        arguments: [
            "", "main", "getpid", "_ZN3foo3barEv", "$", "$x", "_T", "aftermath_elf_test_cdecl_marker",
        ])
    func passesThrough(name: String) {
        #expect(!SwiftDemangle.isSwiftSymbol(name))
        #expect(SwiftDemangle.demangle(name) == name)
    }

    @Test("Malformed Swift-prefixed names do not crash")
    func malformed() {
        for name in ["$s", "$sXXXXXXXX", "$s999999999999999999", "_T0", "$e\u{1}\u{2}", "$s4main3foo"] {
            _ = SwiftDemangle.demangle(name)
        }
    }
}
