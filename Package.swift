// swift-tools-version:6.0
import PackageDescription

// Aftermath's modules, by when their code runs:
// - CSignalShim (C): crash time and the hang watchdog; the only code that runs while the
//   process is broken.
// - Aftermath: the running app's API: start, recording, delivery, FileExporter.
// - AftermathNextLaunch: reading what earlier runs left, judging exits, mapping to records.
// - AftermathOTLP: the OTLP log model, its JSON and protobuf encoders, the exporter protocol.
// - AftermathOTLPHTTP (product): the OTLP/HTTP exporter; the only module that links a network
//   library (libcurl, through CAftermathHTTP) and zlib.
// - AftermathTesting (product): an in-memory exporter for apps' tests.
// - AftermathSymbolication: tools only (the `aftermath` command), never linked into apps; its
//   C side (CSymbolication) uses elfutils through the CDW system library.
// scripts/README.md, section Layout, says what each may depend on.
let package = Package(
    name: "Aftermath",
    products: [
        .library(name: "Aftermath", targets: ["Aftermath"]),
        .library(name: "AftermathOTLPHTTP", targets: ["AftermathOTLPHTTP"]),
        .library(name: "AftermathTesting", targets: ["AftermathTesting"]),
        .executable(name: "aftermath", targets: ["AftermathCLI"]),
        .executable(name: "crash-harness", targets: ["CrashHarness"]),
        .executable(name: "hang-harness", targets: ["HangHarness"]),
        .executable(name: "exit-harness", targets: ["ExitHarness"]),
        .executable(name: "async-harness", targets: ["AsyncHarness"]),
        .executable(name: "aftermath-bench", targets: ["AftermathBench"]),
        .executable(name: "peer-app", targets: ["PeerApp"]),
        .executable(name: "peer-baseline-app", targets: ["PeerBaselineApp"]),
    ],
    targets: [
        // Debian: libunwind-dev, for its headers: libunwind itself is loaded at its first use
        // (dlopen), so no app links it and one without it walks frame pointers.
        .systemLibrary(
            name: "CLibunwind",
            path: "CSignalShim/libunwind",
            providers: [.apt(["libunwind-dev"])]
        ),
        // Crash time (C). Warnings are enforced by scripts/check-c.sh in CI, not by flags here:
        // a product's target with unsafe flags cannot be depended on by version.
        .target(
            name: "CSignalShim",
            dependencies: ["CLibunwind"],
            path: "CSignalShim",
            exclude: ["libunwind", "README.md"],
            // Sources by concern (crash/, unwind/, arch/, hang/, runs/, images/, io/); the headers
            // they share, never seen by Swift, in internal/ (CSignalShim/README.md, The files).
            cSettings: [.define("_GNU_SOURCE"), .headerSearchPath("internal")]
        ),
        .target(
            name: "AftermathOTLP",
            path: "Sources/AftermathOTLP"
        ),
        .target(
            name: "AftermathNextLaunch",
            dependencies: ["CSignalShim", "AftermathOTLP"],
            path: "Sources/AftermathNextLaunch"
        ),
        .target(
            name: "Aftermath",
            dependencies: ["CSignalShim", "AftermathNextLaunch", "AftermathOTLP"],
            path: "Sources/Aftermath"
        ),
        // The OTLP/HTTP exporter's transport: libcurl (Debian: libcurl4-openssl-dev) for HTTP and
        // HTTPS, zlib (Debian: zlib1g-dev) for gzip, behind a small C target.
        .systemLibrary(
            name: "CCurl",
            path: "Sources/CAftermathHTTP/curl",
            pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]
        ),
        .systemLibrary(
            name: "CZlib",
            path: "Sources/CAftermathHTTP/zlib",
            pkgConfig: "zlib",
            providers: [.apt(["zlib1g-dev"])]
        ),
        .target(
            name: "CAftermathHTTP",
            dependencies: ["CCurl", "CZlib"],
            path: "Sources/CAftermathHTTP",
            exclude: ["curl", "zlib"],
            // Also without pkg-config, as CSignalShim's libunwind.
            linkerSettings: [.linkedLibrary("curl"), .linkedLibrary("z")]
        ),
        .target(
            name: "AftermathOTLPHTTP",
            dependencies: ["AftermathOTLP", "CAftermathHTTP"],
            path: "Sources/AftermathOTLPHTTP"
        ),
        .target(
            name: "AftermathTesting",
            dependencies: ["AftermathOTLP"],
            path: "Sources/AftermathTesting"
        ),
        // Tools only. Debian: libdw-dev and libdebuginfod-dev (elfutils: DWARF, build ids,
        // debuginfod); libstdc++ for C++ demangling.
        .systemLibrary(
            name: "CDW",
            path: "Sources/CDW",
            pkgConfig: "libdw",
            providers: [.apt(["libdw-dev", "libdebuginfod-dev"])]
        ),
        .target(
            name: "CSymbolication",
            dependencies: ["CDW"],
            path: "Sources/CSymbolication",
            cSettings: [.define("_GNU_SOURCE")],
            // libdw and libelf (also without pkg-config, as CSignalShim's libunwind), the
            // debuginfod client and __cxa_demangle:
            linkerSettings: [
                .linkedLibrary("dw"), .linkedLibrary("elf"), .linkedLibrary("debuginfod"),
                .linkedLibrary("stdc++"),
            ]
        ),
        .target(
            name: "AftermathSymbolication",
            dependencies: ["AftermathNextLaunch", "CSymbolication"],
            path: "Sources/AftermathSymbolication"
        ),
        .executableTarget(
            name: "AftermathCLI",
            dependencies: ["AftermathNextLaunch", "AftermathSymbolication", "AftermathOTLP"],
            path: "Sources/AftermathCLI"
        ),

        // Test-only C: real faults, the crash writer's fault hook, entry points that expose
        // CSignalShim's internals to the tests. No product links it.
        .target(
            name: "CHarnessFaults",
            dependencies: ["CSignalShim"],
            path: "Harness/CFaults",
            cSettings: [.define("_GNU_SOURCE"), .headerSearchPath("../../CSignalShim/internal")]
        ),
        .target(
            name: "HarnessSupport",
            dependencies: ["AftermathNextLaunch", "AftermathOTLP", "CHarnessFaults"],
            path: "Harness/Support"
        ),
        .executableTarget(
            name: "CrashHarness",
            dependencies: [
                "HarnessSupport", "Aftermath", "AftermathNextLaunch", "AftermathSymbolication",
                "AftermathTesting", "CSignalShim", "CHarnessFaults", "TestSupport",
            ],
            path: "Harness/Crash"
        ),
        .executableTarget(
            name: "HangHarness",
            dependencies: [
                "HarnessSupport", "Aftermath", "AftermathNextLaunch", "AftermathSymbolication",
                "AftermathTesting", "CSignalShim", "CHarnessFaults",
            ],
            path: "Harness/Hang"
        ),
        .executableTarget(
            name: "AsyncHarness",
            dependencies: [
                "HarnessSupport", "Aftermath", "AftermathNextLaunch", "AftermathSymbolication", "AftermathTesting",
                "CHarnessFaults",
            ],
            path: "Harness/Async"
        ),
        .executableTarget(
            name: "ExitHarness",
            dependencies: ["HarnessSupport", "Aftermath", "AftermathNextLaunch", "AftermathTesting", "CSignalShim"],
            path: "Harness/Exit"
        ),
        .executableTarget(
            name: "AftermathBench",
            dependencies: [
                "HarnessSupport", "Aftermath", "AftermathNextLaunch", "AftermathOTLP", "AftermathOTLPHTTP",
                "AftermathSymbolication",
                "AftermathTesting", "CSignalShim", "CHarnessFaults",
            ],
            path: "Harness/Bench"
        ),
        // The side-by-side benchmark with sentry-native (scripts/peer-bench.sh, Harness/Peer):
        // the app with Aftermath and the same app without it, over benchmark-only C probes.
        // No product's target depends on them.
        .target(
            name: "CPeer",
            path: "Harness/Peer/CPeer",
            cSettings: [.define("_GNU_SOURCE")]
        ),
        .target(
            name: "PeerSupport",
            dependencies: ["CPeer"],
            path: "Harness/Peer/Support"
        ),
        .executableTarget(
            name: "PeerApp",
            dependencies: ["PeerSupport", "CPeer", "Aftermath"],
            path: "Harness/Peer/App"
        ),
        .executableTarget(
            name: "PeerBaselineApp",
            dependencies: ["PeerSupport"],
            path: "Harness/Peer/BaselineApp"
        ),

        // Tests: one target per module, and support shared by them (fixtures, OTLP validation).
        .target(
            name: "TestSupport",
            dependencies: ["AftermathNextLaunch", "AftermathOTLP", "CSignalShim"],
            path: "Tests/TestSupport",
            exclude: ["Fixtures"]
        ),
        .testTarget(
            name: "CSignalShimTests",
            dependencies: [
                "CSignalShim", "CHarnessFaults", "AftermathNextLaunch", "AftermathSymbolication", "TestSupport",
            ],
            path: "Tests/CSignalShimTests"
        ),
        .testTarget(
            name: "AftermathOTLPTests",
            dependencies: ["AftermathOTLP", "TestSupport"],
            path: "Tests/AftermathOTLPTests"
        ),
        .testTarget(
            name: "AftermathOTLPHTTPTests",
            dependencies: ["AftermathOTLPHTTP", "AftermathNextLaunch", "TestSupport"],
            path: "Tests/AftermathOTLPHTTPTests"
        ),
        .testTarget(
            name: "AftermathNextLaunchTests",
            dependencies: [
                "AftermathNextLaunch", "AftermathOTLP", "AftermathTesting", "AftermathSymbolication",
                "CSignalShim", "TestSupport",
            ],
            path: "Tests/AftermathNextLaunchTests"
        ),
        .testTarget(
            name: "AftermathSymbolicationTests",
            dependencies: ["AftermathSymbolication", "AftermathNextLaunch", "TestSupport"],
            path: "Tests/AftermathSymbolicationTests"
        ),
        .testTarget(
            name: "AftermathTests",
            dependencies: [
                "Aftermath", "AftermathNextLaunch", "AftermathOTLP", "AftermathTesting",
                "AftermathSymbolication", "CSignalShim", "CHarnessFaults", "TestSupport", "HarnessSupport",
            ],
            path: "Tests/AftermathTests"
        ),
    ],
    swiftLanguageModes: [.v6],
    cLanguageStandard: .c11
)
