import Foundation
import XCTest
@testable import SendOnce

/// Which transport opens the SDK when the app passes none: the core's own stack where it has one (this
/// host's build), the platform's URLSession — one object per process, so `shared()` sees the same — where
/// it has none (the iOS build, `--no-default-features`).
final class PlatformTransportTests: XCTestCase {
    func testACoreWithoutAnHTTPStackOpensOverOneURLSessionTransportPerProcess() {
        let first = SendOnce.effectiveTransport(nil, builtIn: false)
        XCTAssertTrue(first is URLSessionTransport)
        XCTAssertTrue(first as AnyObject === SendOnce.effectiveTransport(nil, builtIn: false) as AnyObject, "one per process")
        XCTAssertNil(SendOnce.effectiveTransport(nil, builtIn: true), "the core's own stack")
        let given = URLSessionTransport()
        XCTAssertTrue(SendOnce.effectiveTransport(given, builtIn: false) as AnyObject === given, "the app's wins")
        XCTAssertTrue(hasBuiltInTransport(), "this host's test build carries the core's stack")
    }
}
