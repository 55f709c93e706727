// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "Aftermath",
    products: [
        .library(name: "Aftermath", targets: ["Aftermath"]),
        .executable(name: "aftermath", targets: ["AftermathCLI"]),
        .executable(name: "crash-harness", targets: ["CrashHarness"]),
        .executable(name: "hang-harness", targets: ["HangHarness"]),
        .executable(name: "exit-harness", targets: ["ExitHarness"]),
        .executable(name: "aftermath-bench", targets: ["AftermathBench"]),
    ],
    targets: [
        // C: everything that runs while the process is broken. See CSignalShim/README.md.
        .target(
            name: "CSignalShim",
            path: "CSignalShim",
            cSettings: [
                .unsafeFlags(["-std=c11", "-Wall", "-Wextra", "-Werror=implicit-function-declaration"]),
                .define("_GNU_SOURCE"),
            ],
            linkerSettings: [.linkedLibrary("unwind")]
        ),
        .target(
            name: "Aftermath",
            dependencies: ["CSignalShim"],
            path: "Sources/Aftermath"
        ),
        .executableTarget(
            name: "AftermathCLI",
            dependencies: ["Aftermath"],
            path: "Sources/AftermathCLI"
        ),
        .executableTarget(
            name: "CrashHarness",
            dependencies: ["Aftermath", "CSignalShim"],
            path: "Harness"
        ),
        .executableTarget(
            name: "HangHarness",
            dependencies: ["Aftermath", "CSignalShim"],
            path: "HangHarness"
        ),
        .executableTarget(
            name: "ExitHarness",
            dependencies: ["Aftermath", "CSignalShim"],
            path: "ExitHarness"
        ),
        .executableTarget(
            name: "AftermathBench",
            dependencies: ["Aftermath", "CSignalShim"],
            path: "Bench"
        ),
        .testTarget(
            name: "AftermathTests",
            dependencies: ["Aftermath", "CSignalShim"],
            path: "Tests/AftermathTests",
            resources: [.copy("Fixtures")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
