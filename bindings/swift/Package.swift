// swift-tools-version:5.9
// SwiftPM package of the sendonce Swift bindings.
//
//   sendonce_ffiFFI  C module: generated header + module.modulemap (links libsendonce_ffi)
//   SendOnceFFI      generated Swift (uniffi); do not edit, made by scripts/gen-bindings
//   SendOnce         the thin idiomatic layer apps import
//
// Generated sources are gitignored: run scripts/gen-bindings first (scripts/test-all does).
// The host-built library is found in SENDONCE_FFI_LIB_DIR, or ../../target/debug.
import PackageDescription

let libDir = Context.environment["SENDONCE_FFI_LIB_DIR"]
    ?? "\(Context.packageDirectory)/../../target/debug"

let package = Package(
    name: "SendOnce",
    products: [
        .library(name: "SendOnce", targets: ["SendOnce"]),
        // Test helpers (server-mock on loopback) for this package's tests and the demo's; not for apps.
        .library(name: "SendOnceTestSupport", targets: ["SendOnceTestSupport"]),
    ],
    targets: [
        .systemLibrary(name: "sendonce_ffiFFI", path: "Sources/sendonce_ffiFFI"),
        .target(
            name: "SendOnceFFI",
            dependencies: ["sendonce_ffiFFI"],
            path: "Sources/SendOnceFFI",
            linkerSettings: [
                // Host builds only: an iOS build links the XCFramework instead (see bindings/README.md).
                .unsafeFlags(["-L", libDir, "-Xlinker", "-rpath", "-Xlinker", libDir], .when(platforms: [.linux, .macOS])),
            ]
        ),
        .target(name: "SendOnce", dependencies: ["SendOnceFFI"], path: "Sources/SendOnce"),
        .target(name: "SendOnceTestSupport", path: "Sources/SendOnceTestSupport"),
        .testTarget(name: "SendOnceTests", dependencies: ["SendOnce", "SendOnceTestSupport"], path: "Tests/SendOnceTests"),
    ]
)
