import Foundation
import SendOnce
import SendOnceTestSupport
import XCTest

// --- from bindings/README.md -------------------------------------------------------------------------
func pay(baseUrl: String, dbPath: String, token: String, to userId: String, savedId: String?) async throws -> Transfer {
    let sdk = try await SendOnce.open(SendOnceConfig(baseUrl: baseUrl, dbPath: dbPath, accessToken: AccessToken(value: token)))
    let list = Task { var seen = 0; for await _ in sdk.transfers { seen += 1 }; return seen }  // ends on close
    let composer = try await sdk.restoreComposer(savedLocalId: savedId)       // savedId: from @SceneStorage
    let t = try await composer.confirm(to: userId, amountMinor: 50_000, currency: "BDT")  // 500.00 BDT
    let outcome = try await sdk.outcome(of: t.localId)     // throws CancellationError if its task is cancelled
    if outcome.rejection?.reason == .insufficientFunds { print("not enough money") }
    let history = try await sdk.transfers(after: nil, limit: 50)
    sdk.close()                                            // ends `list`'s loop and the composer's streams
    let seen = await list.value
    print("\(history.count) in the history, \(seen) lists seen")
    return outcome
}
// -----------------------------------------------------------------------------------------------------

/// bindings/README.md's Swift sample, verbatim: it compiles, returns, and its `for await` ends.
final class ReadmeSampleTests: ServerTestCase {
    func testTheReadmeSampleRunsAsWritten() async throws {
        let alice = try await server.createUser("alice", balanceMinor: 1_000_000)
        let bob = try await server.createUser("bob")
        let outcome = try await pay(baseUrl: server.baseUrl, dbPath: server.dbPath(), token: alice.token, to: bob.id, savedId: nil)
        XCTAssertEqual(outcome.state, .succeeded)
        let debits = try await server.debits(outcome.idempotencyKey)
        XCTAssertEqual(debits.count, 1)
    }
}
