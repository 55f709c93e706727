import Testing
import AftermathNextLaunch
import AftermathOTLP
import CSignalShim
import TestSupport

@Suite struct InAppTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var root: String
        var path: String
        var main = false
        var inApp: Bool
        var testDescription: String { "\(root) \(path)\(main ? " (main)" : "") → \(inApp)" }
    }

    @Test(arguments: [
        Case(root: "/opt/shop", path: "/opt/shop/bin/shop", main: true, inApp: true),
        Case(root: "/opt/shop", path: "/home/me/build/debug/shop", main: true, inApp: true),
        Case(root: "/opt/shop", path: "/opt/shop/lib/libx.so", inApp: true),
        Case(root: "/opt/shop/", path: "/opt/shop/lib/libx.so", inApp: true),
        Case(root: "/opt//shop", path: "/opt/shop//lib/libx.so", inApp: true),
        Case(root: "/opt/shop/bin/..", path: "/opt/shop/lib/libx.so", inApp: true),
        Case(root: "/opt/shop", path: "/opt/shop/lib/libx.so (deleted)", inApp: true),
        Case(root: "/opt/shop", path: "/opt/shop2/lib.so", inApp: false),
        Case(root: "/opt/shop", path: "/opt/shop", inApp: false),
        Case(root: "/opt/shop", path: "/opt/shop/../shop2/lib.so", inApp: false),
        Case(root: "/opt/shop", path: "/opt/sho/lib.so", inApp: false),
        Case(root: "/opt/shop", path: "opt/shop/lib.so", inApp: false),
        Case(root: "/opt/shop", path: "/usr/lib/x86_64-linux-gnu/libc.so.6", inApp: false),
        Case(root: "/opt/shop", path: "/usr/lib/swift/linux/libswiftCore.so", inApp: false),
        Case(root: "/opt/shop", path: "[vdso]", inApp: false),
        Case(root: "/opt/shop", path: "[vsyscall]", inApp: false),
        Case(root: "/opt/shop", path: "[anon:x]", inApp: false),
        Case(root: "/opt/shop", path: "[heap]", main: true, inApp: false),
        Case(root: "/opt/shop", path: "/memfd:jit (deleted)", inApp: false),
        Case(root: "/", path: "/memfd:jit (deleted)", inApp: false),
        Case(root: "/opt/shop", path: "", inApp: false),
        Case(root: "/opt/shop", path: " (deleted)", main: true, inApp: false),
        Case(root: "/", path: "/opt/shop/lib/libx.so", inApp: false),
        Case(root: "/", path: "/usr/lib/x86_64-linux-gnu/libc.so.6", inApp: false),
        Case(root: "//", path: "/usr/lib/x86_64-linux-gnu/libc.so.6", inApp: false),
        Case(root: "/", path: "/opt/shop/bin/shop", main: true, inApp: true),
        Case(root: "", path: "/opt/shop/lib/libx.so", inApp: false),
        Case(root: "", path: "/opt/shop/bin/shop (deleted)", main: true, inApp: true),
    ])
    func classifies(_ c: Case) {
        #expect(InAppClassifier(appRoot: c.root).isInApp(path: c.path, isMainExecutable: c.main) == c.inApp)
    }

    @Test(arguments: [
        ("/opt/shop/lib/libx.so", "libx.so"),
        ("/opt/shop/lib/libx.so (deleted)", "libx.so"),
        ("/usr/lib/x86_64-linux-gnu/libc.so.6", "libc.so.6"),
        ("[vdso]", "[vdso]"),
        ("[anon:x] (deleted)", "[anon:x]"),
        ("/memfd:jit (deleted)", "memfd:jit"),
        ("shop", "shop"),
        ("", ""),
    ])
    func imageName(_ path: String, expected: String) {
        #expect(InAppClassifier.imageName(path) == expected)
    }
}
