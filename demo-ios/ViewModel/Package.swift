// swift-tools-version:6.0
// The iOS demo's screen logic as a plain SwiftPM library (no UIKit/SwiftUI), tested on Linux against the
// real Rust library (through ../../bindings/swift) and the real server-mock. The SwiftUI shell in ../App
// depends on this package.
//
//   scripts/test-all bindings demo-ios
//   = scripts/gen-bindings && scripts/in-swift-chroot swift test --disable-swift-testing --package-path demo-ios/ViewModel
//
// Why not @Observable: the Debian Swift 6 toolchain's libswiftObservation.so does not link on Linux
// (undefined swift::threading::fatal), so DemoViewModel publishes its state as an AsyncStream instead;
// the SwiftUI shell reads it in a `.task`.
import PackageDescription

let package = Package(
    name: "DemoViewModel",
    defaultLocalization: "en",
    platforms: [.iOS(.v16), .macOS(.v13)],
    products: [.library(name: "DemoViewModel", targets: ["DemoViewModel"])],
    dependencies: [.package(path: "../../bindings/swift")],
    targets: [
        .target(
            name: "DemoViewModel",
            dependencies: [.product(name: "SendOnce", package: "swift")],
            // The texts of the SDK's message keys, per language (Resources/<lang>.lproj/Localizable.strings).
            resources: [.process("Resources")]
        ),
        .testTarget(
            name: "DemoViewModelTests",
            dependencies: ["DemoViewModel", .product(name: "SendOnceTestSupport", package: "swift")],
            // The view model is Swift 6 (strict concurrency); its MainActor tests call the XCTestCase's own
            // async helpers, which Swift 6 refuses for a non-Sendable XCTestCase, so they stay in 5 mode.
            swiftSettings: [.swiftLanguageMode(.v5)]
        ),
    ]
)
