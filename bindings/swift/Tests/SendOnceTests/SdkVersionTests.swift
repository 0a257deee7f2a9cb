import XCTest
@testable import SendOnce

final class SdkVersionTests: XCTestCase {
    /// The generated module loads libsendonce_ffi and calls into Rust.
    func testSdkVersionComesFromRust() {
        let version = SendOnce.version
        XCTAssertFalse(version.isEmpty)
        XCTAssertEqual(version.split(separator: ".").count, 3, "semver, got \(version)")
        XCTAssertEqual(version, sdkVersion())
    }
}
