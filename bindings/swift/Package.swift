// swift-tools-version:6.0
// SwiftPM package of the sendonce Swift bindings, Swift 6 language mode (strict concurrency).
//
//   sendonce_ffiFFI  C module: generated header + module.modulemap (links libsendonce_ffi)
//   SendOnceFFI      generated Swift (uniffi); do not edit, made by scripts/gen-bindings
//   SendOnce         the thin idiomatic layer apps import (+ its privacy manifest)
//   SendOnceTesting  FakeSendOnce / FakeComposer: in-memory doubles for an app's own unit tests
//
// Generated sources are gitignored: run scripts/gen-bindings first (scripts/test-all does).
//
// No unsafeFlags anywhere, so an app can depend on this package. On Linux and for host tests the
// linker and the loader find the host-built library through LIBRARY_PATH / LD_LIBRARY_PATH
// (scripts/in-swift-chroot sets both to target/debug). An iOS app uses the XCFramework instead:
// scripts/package-ios builds it and prints the line that replaces the system library below,
//
//   .binaryTarget(name: "sendonce_ffiFFI", url: "https://<release host>/sendonce_ffiFFI.xcframework.zip",
//                 checksum: "<swift package compute-checksum output>"),
//
// (or `.binaryTarget(name: "sendonce_ffiFFI", path: "sendonce_ffiFFI.xcframework")` for a local build);
// see bindings/README.md.
import PackageDescription

let package = Package(
    name: "SendOnce",
    // What the code needs: Swift concurrency back-deployed (iOS 15 / macOS 12); no API newer than that.
    platforms: [.iOS(.v15), .macOS(.v12)],
    products: [
        .library(name: "SendOnce", targets: ["SendOnce"]),
        // In-memory test doubles (FakeSendOnce, FakeComposer) for an app's own unit tests.
        .library(name: "SendOnceTesting", targets: ["SendOnceTesting"]),
        // Test helpers (server-mock on loopback) for this package's tests and the demo's; not for apps.
        .library(name: "SendOnceTestSupport", targets: ["SendOnceTestSupport"]),
    ],
    targets: [
        .systemLibrary(name: "sendonce_ffiFFI", path: "Sources/sendonce_ffiFFI"),
        .target(
            name: "SendOnceFFI",
            dependencies: ["sendonce_ffiFFI"],
            path: "Sources/SendOnceFFI",
            // Swift 6.0.3's region checker (TransferNonSendable) crashes the compiler on uniffi's
            // generated glue for async foreign traits (AccessTokenProvider, HttpTransport); the generated
            // file is compiled in 5 mode, the layer apps call (SendOnce) stays in 6.
            swiftSettings: [.swiftLanguageMode(.v5)]
        ),
        .target(
            name: "SendOnce",
            dependencies: ["SendOnceFFI"],
            path: "Sources/SendOnce",
            // SQLite reads its files' timestamps (stat): the App Store needs the reason (C617.1) declared.
            resources: [.copy("PrivacyInfo.xcprivacy")]
        ),
        .target(name: "SendOnceTesting", dependencies: ["SendOnce"], path: "Sources/SendOnceTesting"),
        .target(name: "SendOnceTestSupport", path: "Sources/SendOnceTestSupport"),
        // A second process on one file for the Busy test (no product: apps never see it).
        .executableTarget(name: "SendOnceHoldFile", dependencies: ["SendOnce"], path: "Sources/SendOnceHoldFile"),
        // The app's process SIGKILLed while an order is parked, for OperationsTests (no product either).
        .executableTarget(name: "SendOnceParkOrder", dependencies: ["SendOnce"], path: "Sources/SendOnceParkOrder"),
        .testTarget(
            name: "SendOnceTests", dependencies: ["SendOnce", "SendOnceTestSupport", "SendOnceTesting"],
            path: "Tests/SendOnceTests"),
    ],
    swiftLanguageModes: [.v6]
)
