// README.md's Swift code, as written there: scripts/check-readme keeps each README block identical to
// the marked region below, and these tests run it against the real server-mock on loopback.
import Foundation
import SendOnceTestSupport
import XCTest

// --- README.md, app developers, Swift ---------------------------------------------------------------
import SendOnce

func payRent(_ config: SendOnceConfig, to landlord: String, show: @escaping @Sendable ([Transfer]) -> Void) async throws -> Transfer {
    // Open: one instance per process, shared by the UI, a BGTaskScheduler task and a push handler;
    // transfers a killed app left unfinished resume here with their own keys.
    let sdk = try await SendOnce.shared(config)
    // Observe: the history as an AsyncStream, newest first, for a list on screen.
    let history = Task { for await list in sdk.transfers { show(list) } }
    defer { history.cancel() }
    // Send: the composer mints one key per intent however many taps, commits the transfer
    // before the first byte leaves, and keeps Send disabled until a definitive answer.
    let composer = try await sdk.composer()
    let sent = try await composer.confirm(to: landlord, amountMinor: 50_000, currency: "BDT")  // 500.00 BDT
    return try await sdk.outcome(of: sent.localId)  // .succeeded, .rejected (typed reason), .needsAttention
}

// Background, in a BGTaskScheduler task: send what is due, return by the deadline; non-nil = run again then.
func drainNow(_ config: SendOnceConfig) async throws -> TimeInterval? {
    try await SendOnce.shared(config).drain(deadline: 25).nextAttemptIn
}
// ----------------------------------------------------------------------------------------------------

/// Counts what the history stream delivered (written from the stream's task, read by the test).
final class Deliveries: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    func add() { lock.lock(); count += 1; lock.unlock() }
    var value: Int { lock.lock(); defer { lock.unlock() }; return count }
}

final class ReadmeDoorsTests: ServerTestCase {
    func testTheReadmeAppCodeRunsAsWritten() async throws {
        let alice = try await server.createUser("alice", balanceMinor: 100_000)
        let bob = try await server.createUser("bob")
        let config = SendOnceConfig(baseUrl: server.baseUrl, dbPath: server.dbPath(), accessToken: AccessToken(value: alice.token))
        let delivered = Deliveries()
        let outcome = try await payRent(config, to: bob.id) { _ in delivered.add() }
        XCTAssertEqual(outcome.state, .succeeded)
        let debits = try await server.debits(outcome.idempotencyKey)
        XCTAssertEqual(debits.count, 1)
        let next = try await drainNow(config)
        XCTAssertNil(next, "nothing left to send")
        try await SendOnce.shared(config).close()
    }
}

// --- README.md, app developers, Swift: test against train mode --------------------------------------
final class RentTests: ServerTestCase {  // server-mock on loopback, from SendOnceTestSupport
    func testRentMovesOnceOnATrain() async throws {
        let alice = try await server.createUser("alice", balanceMinor: 100_000)
        let bob = try await server.createUser("bob")
        let sdk = try await SendOnce.open(SendOnceConfig(
            baseUrl: server.baseUrl, dbPath: server.dbPath(), accessToken: AccessToken(value: alice.token),
            clockSpeed: 50))  // the train's minutes pass in seconds
        defer { sdk.close() }
        try await sdk.setNetworkProfile(.train, seed: 7)  // tunnels, lost answers, replays
        let sent = try await sdk.sendTransfer(to: bob.id, amountMinor: 5_000, currency: "BDT")
        let done = try await sdk.outcome(of: sent.localId)
        XCTAssertEqual(done.state, .succeeded)
        let debits = try await server.debits(sent.idempotencyKey)
        XCTAssertEqual(debits.count, 1)  // once, whatever the train did
    }
}
// ----------------------------------------------------------------------------------------------------
