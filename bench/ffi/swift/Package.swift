// swift-tools-version:5.9
// FFI cost from Swift: one executable that times cheap SDK queries through the uniffi bindings.
// Not built in place: scripts/bench (figure 2) copies this file and main.swift into
// $CARGO_TARGET/bench-ffi/swift next to bindings it generates from the release library it loads,
// then builds and runs it in the Swift chroot (scripts/in-swift-chroot).
import PackageDescription

let libDir = Context.environment["SENDONCE_FFI_LIB_DIR"] ?? "\(Context.packageDirectory)/../../release"

let package = Package(
    name: "FfiBench",
    targets: [
        .systemLibrary(name: "sendonce_ffiFFI", path: "Sources/sendonce_ffiFFI"),
        .target(
            name: "SendOnceFFI",
            dependencies: ["sendonce_ffiFFI"],
            path: "Sources/SendOnceFFI",
            linkerSettings: [
                .unsafeFlags(["-L", libDir, "-Xlinker", "-rpath", "-Xlinker", libDir]),
            ]
        ),
        .executableTarget(name: "FfiBench", dependencies: ["SendOnceFFI"], path: "Sources/FfiBench"),
    ]
)
