// swift-tools-version:6.0
// A real SwiftNIO HTTP server with Aftermath watching its event loops and the Swift concurrency
// pool, for scripts/nio-harness.sh. Built offline: SwiftNIO and the three packages it needs come
// from copies of ../shared/deps (AFTERMATH_NIO_DEPS), Aftermath from this repository.
import Foundation
import PackageDescription

let environment = Context.environment
let root = environment["AFTERMATH_ROOT"] ?? "../.."
let deps = environment["AFTERMATH_NIO_DEPS"] ?? "../../.build/nio-deps"
// A path dependency is known by its directory's name.
let rootIdentity = URL(fileURLWithPath: root).standardizedFileURL.lastPathComponent.lowercased()

let package = Package(
    name: "AftermathNIOHarness",
    dependencies: [
        .package(path: root),
        .package(path: deps + "/swift-nio"),
    ],
    targets: [
        .executableTarget(
            name: "NIOServer",
            dependencies: [
                .product(name: "Aftermath", package: rootIdentity),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            path: "Sources/NIOServer",
            swiftSettings: [.swiftLanguageMode(.v6)]
        )
    ]
)
