import Foundation
import SendOnceTestSupport
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

/// Before: a `Transfer` printed (and dumped) its recipient and note, so a crash reporter attaching the
/// last transfer, or a debug log of the list, sent personal data along.
final class TransferRedactionTests: ServerTestCase {
    func testATransferAndItsRequestPrintWithoutTheRecipientAndTheNote() async throws {
        let alice = try await server.createUser("alice", balanceMinor: 1_000_000)
        let bob = try await server.createUser("bob")
        let config = SendOnceConfig(baseUrl: server.baseUrl, dbPath: server.dbPath(), accessToken: AccessToken(value: alice.token))
        let sdk = try await SendOnce.open(config)
        defer { sdk.close() }
        let t = try await sdk.sendTransfer(to: bob.id, amountMinor: 4_000, currency: "BDT", note: "rent for flat 3B")
        let done = try await sdk.outcome(of: t.localId)
        let request = TransferRequest(toUserId: bob.id, amountMinor: 4_000, currency: "BDT", note: "rent for flat 3B")
        let op = OperationRequest(
            operationType: "payout", method: .post, path: "/v2/payouts",
            headers: [HttpHeader(name: "x-api-key", value: "key-s3cret")], contentType: "application/json",
            body: Data(#"{"iban":"DE00"}"#.utf8), counterparty: "Jane Doe", amountMinor: 1, currency: "EUR", note: nil
        )
        for value in [t, done] as [Any] + [request, op] as [Any] {
            var dumped = ""
            dump(value, to: &dumped)
            for printed in [String(describing: value), String(reflecting: value), "\(value)", dumped] {
                for secret in [bob.id, "flat 3B", "key-s3cret", "DE00", "Jane Doe"] {
                    XCTAssertFalse(printed.contains(secret), "\(secret) leaked: \(printed)")
                }
                XCTAssertTrue(printed.contains("<redacted>"), printed)
            }
        }
        XCTAssertTrue("\(done)".contains(done.idempotencyKey), "what support needs still prints")
        XCTAssertEqual(done.note, "rent for flat 3B", "the value itself is there")
    }
}
