import SendOnceTestSupport
import Foundation
import XCTest
@testable import SendOnce

/// The SDK beyond the open screen, from Swift: the shared instance, drain, token refresh, accounts,
/// events, the log sink, and URLSession as the transport.
final class BackgroundTests: XCTestCase {
    nonisolated(unsafe) static var server: MockServer?
    var server: MockServer { Self.server! }

    override class func setUp() {
        super.setUp()
        do { server = try MockServer() } catch { fatalError("could not start server-mock: \(error)") }
    }

    override class func tearDown() {
        server?.stop()
        server = nil
        super.tearDown()
    }

    func config(_ user: User, token: String? = nil, accountId: String? = nil, profile: NetworkProfile? = nil) -> SendOnceConfig {
        SendOnceConfig(
            baseUrl: server.baseUrl, dbPath: server.dbPath(), accessToken: AccessToken(value: token ?? user.token),
            retry: RetryPolicy(baseMs: 20, capMs: 300, budgetBurst: 1000, budgetPerSecond: 1000),
            requestTimeoutMs: 5000, networkProfile: profile, accountId: accountId, backgroundWakeWindowMs: 200
        )
    }

    func testTheAppSharesOneInstanceNeverAlreadyOpen() async throws {
        let alice = try await server.createUser("alice", balanceMinor: 1_000_000)
        let config = config(alice)
        let ui = try SendOnce.shared(config)
        let task = try SendOnce.shared(config)
        XCTAssertTrue(ui === task)
        XCTAssertThrowsError(try SendOnce(config: config)) { error in
            guard case SendOnceError.AlreadyOpen = error else { return XCTFail("\(error)") }
        }
        ui.close()
        let next = try SendOnce.shared(config)
        XCTAssertFalse(next === ui, "a closed instance is replaced")
        next.close()
    }

    func testConfirmedOfflineBackgroundedThenDrainedSucceeds() async throws {
        let alice = try await server.createUser("alice", balanceMinor: 1_000_000)
        let bob = try await server.createUser("bob")
        let sdk = try SendOnce.shared(config(alice))
        defer { sdk.close() }
        try sdk.setNetworkAvailable(false)
        let t = try await sdk.sendTransfer(to: bob.id, amountMinor: 2_500, currency: "BDT")
        try sdk.setInForeground(false)
        XCTAssertEqual(try sdk.transfer(t.localId).state, .pending)
        let summary = try await sdk.drain(deadline: .seconds(20))
        XCTAssertFalse(summary.deadlineReached)
        XCTAssertEqual(summary.finished.map(\.localId), [t.localId])
        XCTAssertEqual(summary.finished.first?.state, .succeeded)
        XCTAssertTrue(summary.unfinished.isEmpty)
        let debits = try await server.debits(t.idempotencyKey)
        XCTAssertEqual(debits.count, 1)
    }

    func testADeadlineShorterThanTheRequestReturnsAndKeepsTheKey() async throws {
        let alice = try await server.createUser("alice", balanceMinor: 1_000_000)
        let bob = try await server.createUser("bob")
        let slow = NetworkProfile.custom(settings: NetsimSettings(latencyMs: 1500))
        let sdk = try SendOnce.shared(config(alice, profile: slow))
        defer { sdk.close() }
        try sdk.setNetworkAvailable(false)
        let t = try await sdk.sendTransfer(to: bob.id, amountMinor: 900, currency: "BDT")
        let short = try await sdk.drain(deadline: .milliseconds(200))
        XCTAssertTrue(short.deadlineReached)
        XCTAssertEqual(short.unfinished.map(\.localId), [t.localId])
        XCTAssertEqual(short.unfinished.first?.state, .sending, "returned with the request out")
        let before = try await server.debits(t.idempotencyKey)
        XCTAssertEqual(before.count, 0)
        let long = try await sdk.drain(deadline: .seconds(30))
        XCTAssertEqual(long.finished.first?.state, .succeeded)
        XCTAssertEqual(long.finished.first?.idempotencyKey, t.idempotencyKey)
        let after = try await server.debits(t.idempotencyKey)
        XCTAssertEqual(after.count, 1)
    }

    final class Provider: AccessTokenProvider, @unchecked Sendable {
        let token: String
        let lock = NSLock()
        var asked: [Bool] = []
        init(_ token: String) { self.token = token }
        func token(forceRefresh: Bool) async throws -> String? {
            lock.lock()
            asked.append(forceRefresh)
            lock.unlock()
            return token
        }
    }

    func testA401AsksTheProviderOnceAndRetriesWithTheSameKey() async throws {
        let alice = try await server.createUser("alice", balanceMinor: 1_000_000)
        let bob = try await server.createUser("bob")
        let provider = Provider(alice.token)
        let sdk = try SendOnce(config: config(alice, token: "expired"), tokenProvider: provider, transport: nil)
        defer { sdk.close() }
        let t = try await sdk.sendTransfer(to: bob.id, amountMinor: 1_000, currency: "BDT")
        let done = try await sdk.outcome(of: t.localId)
        XCTAssertEqual(done.state, .succeeded)
        XCTAssertEqual(provider.asked, [true])
        let debits = try await server.debits(t.idempotencyKey)
        XCTAssertEqual(debits.count, 1)
    }

    final class Failing: AccessTokenProvider, @unchecked Sendable {
        let lock = NSLock()
        var asked = 0
        func token(forceRefresh: Bool) async throws -> String? {
            lock.lock()
            asked += 1
            lock.unlock()
            throw URLError(.userAuthenticationRequired)
        }
    }

    func testAProviderThatThrowsParksTheTransferInAuthRequired() async throws {
        let alice = try await server.createUser("alice", balanceMinor: 1_000_000)
        let bob = try await server.createUser("bob")
        let provider = Failing()
        let sdk = try SendOnce(config: config(alice, token: "expired"), tokenProvider: provider, transport: nil)
        defer { sdk.close() }
        let t = try await sdk.sendTransfer(to: bob.id, amountMinor: 1_000, currency: "BDT")
        for _ in 0..<3000 where try sdk.transfer(t.localId).state != .authRequired {
            try await Task.sleep(nanoseconds: 10_000_000)
        }
        XCTAssertEqual(try sdk.transfer(t.localId).state, .authRequired)
        XCTAssertEqual(provider.asked, 1)
        try sdk.setAccessToken(alice.token)
        let done = try await sdk.outcome(of: t.localId)
        XCTAssertEqual(done.state, .succeeded)
        XCTAssertEqual(done.idempotencyKey, t.idempotencyKey)
    }

    func testAnotherAccountIsRefusedAndSignOutRefusesUnlessForced() async throws {
        let alice = try await server.createUser("alice", balanceMinor: 1_000_000)
        let bob = try await server.createUser("bob")
        let sdk = try SendOnce(config: config(alice, accountId: "acct-swift-alice"))
        defer { sdk.close() }
        XCTAssertEqual(try sdk.accountId(), "acct-swift-alice")
        try sdk.setNetworkAvailable(false)
        let t = try await sdk.sendTransfer(to: bob.id, amountMinor: 300, currency: "BDT")
        XCTAssertThrowsError(try sdk.signIn(accountId: "acct-swift-bob", token: bob.token)) { error in
            guard case SendOnceError.AccountMismatch = error else { return XCTFail("\(error)") }
        }
        XCTAssertThrowsError(try sdk.signOut()) { error in
            guard case SendOnceError.UnfinishedTransfers = error else { return XCTFail("\(error)") }
        }
        let report = try sdk.signOut(force: true)
        XCTAssertEqual(report.discardedUnfinished.map(\.localId), [t.localId])
        XCTAssertTrue(try sdk.transfers().isEmpty)
        XCTAssertNil(try sdk.accountId())
    }

    final class Lines: @unchecked Sendable {
        let lock = NSLock()
        var records: [LogRecord] = []
        var events: [SdkEvent] = []
        func add(_ r: LogRecord) { lock.lock(); records.append(r); lock.unlock() }
        func add(_ e: SdkEvent) { lock.lock(); events.append(e); lock.unlock() }
        func snapshot() -> ([LogRecord], [SdkEvent]) { lock.lock(); defer { lock.unlock() }; return (records, events) }
    }

    func testURLSessionCarriesTheTransferEventsFollowAndLogsHoldNoSecrets() async throws {
        let alice = try await server.createUser("alice", balanceMinor: 1_000_000)
        let bob = try await server.createUser("bob")
        let lines = Lines()
        try SendOnce.setLogSink(level: .trace) { lines.add($0) }
        defer { try? SendOnce.setLogSink(level: .trace, nil) }
        let sdk = try SendOnce(config: config(alice), tokenProvider: nil, transport: URLSessionTransport())
        defer { sdk.close() }
        try sdk.addEventListener { lines.add($0) }
        let t = try await sdk.sendTransfer(to: bob.id, amountMinor: 700, currency: "BDT", note: "swift-note-marker")
        let done = try await sdk.outcome(of: t.localId)
        XCTAssertEqual(done.state, .succeeded)
        let debits = try await server.debits(t.idempotencyKey)
        XCTAssertEqual(debits.count, 1, "through URLSession, once")
        for _ in 0..<1000 {
            if lines.snapshot().1.contains(where: { if case .resolved = $0 { return true } else { return false } }) { break }
            try await Task.sleep(nanoseconds: 10_000_000)
        }
        let (records, events) = lines.snapshot()
        XCTAssertTrue(events.contains { if case .attemptAnswered(_, _, 201, _, _) = $0 { return true } else { return false } }, "\(events)")
        let text = records.map(\.message).joined(separator: "\n")
        XCTAssertTrue(text.contains("attempt answered"), "the sink got the SDK's lines")
        for secret in [bob.id, "swift-note-marker", alice.token] {
            XCTAssertFalse(text.contains(secret), "\(secret) logged")
        }
    }
}
