import Foundation
import XCTest
@testable import SendOnce

/// Printing what the SDK hands an app never shows a secret.
final class RedactionTests: XCTestCase {
    /// Before: the generated `HttpRequest`'s description (and `dump`) showed `value: "Bearer <token>"`, so a
    /// transport that logged its request leaked the token.
    func testAPrintedRequestNeverShowsTheBearerToken() {
        let request = HttpRequest(
            method: "POST", url: "https://api.example.com/v1/transfers",
            headers: RedactedHeaders([
                HttpHeader(name: "authorization", value: "Bearer s3cret-token"),
                HttpHeader(name: "idempotency-key", value: "k-1"),
            ]),
            body: Data()
        )
        var dumped = ""
        dump(request, to: &dumped)
        for printed in [String(describing: request), String(reflecting: request), "\(request)", dumped, "\(request.headers)"] {
            XCTAssertFalse(printed.contains("s3cret-token"), printed)
            XCTAssertTrue(printed.contains("k-1"), printed)
        }
        // Sent as it is: iterating gives the real value.
        XCTAssertEqual(request.headers.first { $0.name == "authorization" }?.value, "Bearer s3cret-token")
    }
}
