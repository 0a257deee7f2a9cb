import SendOnceTestSupport
import Foundation
import XCTest
@testable import SendOnce

/// The SDK beyond the open screen, from Swift: the shared instance, drain, token refresh, accounts,
/// events, the log sink, and URLSession as the transport.
final class BackgroundTests: ServerTestCase {
    func config(_ user: User, token: String? = nil, accountId: String? = nil, profile: NetworkProfile? = nil) -> SendOnceConfig {
        SendOnceConfig(
            baseUrl: server.baseUrl, dbPath: server.dbPath(), accessToken: AccessToken(value: token ?? user.token),
            retry: RetryPolicy(base: 0.02, cap: 0.3, giveUpAfter: 86_400, jitter: true, budgetBurst: 1000, budgetPerSecond: 1000),
            requestTimeout: 5, networkProfile: profile, accountId: accountId, backgroundWakeWindow: 0.2
        )
    }

    func testTheAppSharesOneInstanceNeverAlreadyOpen() async throws {
        let alice = try await server.createUser("alice", balanceMinor: 1_000_000)
        let config = config(alice)
        let ui = try await SendOnce.shared(config)
        let task = try await SendOnce.shared(config)
        XCTAssertTrue(ui === task)
        await assertThrows({ if case .AlreadyOpen = $0 { return true }; return false }, "open beside shared") {
            try await SendOnce.open(config)
        }
        // Two claims: the UI's close() leaves the task's instance open; the task's close() closes it.
        ui.close()
        _ = try await task.unfinishedTransfers()
        task.close()
        await assertThrows({ if case .Closed = $0 { return true }; return false }, "closed by its last holder") {
            try await task.unfinishedTransfers()
        }
        let next = try await SendOnce.shared(config)
        XCTAssertFalse(next === ui, "a closed instance is replaced")
        next.close()
    }

    /// Before: a second shared() with another transport, token provider or base URL got the first instance
    /// and its own settings were dropped without a word; the UI's close() closed the task's instance mid-send.
    func testSharedRefusesAnotherTransportProviderOrSettingAndOneHoldersCloseKeepsItOpen() async throws {
        let alice = try await server.createUser("alice", balanceMinor: 1_000_000)
        let bob = try await server.createUser("bob")
        let config = config(alice)
        let pinned = URLSessionTransport()
        let provider = Provider(alice.token)
        let ui = try await SendOnce.shared(config, tokenProvider: provider, transport: pinned)
        defer { ui.close() }
        // Records are immutable: the same config but for one field.
        let variant = { (url: String, timeout: Double, account: String?, token: String) in
            SendOnceConfig(
                baseUrl: url, dbPath: config.dbPath, accessToken: AccessToken(value: token), retry: config.retry,
                requestTimeout: timeout, accountId: account, backgroundWakeWindow: 0.2
            )
        }
        let other = variant("https://api.example.com", 5, nil, alice.token)
        let slower = variant(server.baseUrl, 60, nil, alice.token)
        let bound = variant(server.baseUrl, 5, "usr_other", alice.token)
        let refused: [(String, () async throws -> SendOnce)] = [
            ("a task without the UI's transport and provider", { try await SendOnce.shared(config) }),
            ("another transport object", { try await SendOnce.shared(config, tokenProvider: provider, transport: URLSessionTransport()) }),
            ("another token provider", { try await SendOnce.shared(config, tokenProvider: Provider("x"), transport: pinned) }),
            ("another base URL", { try await SendOnce.shared(other, tokenProvider: provider, transport: pinned) }),
            ("another timeout", { try await SendOnce.shared(slower, tokenProvider: provider, transport: pinned) }),
            ("another account", { try await SendOnce.shared(bound, tokenProvider: provider, transport: pinned) }),
        ]
        for (what, call) in refused {
            await assertThrows({ if case .InvalidConfig = $0 { return true }; return false }, what) { _ = try await call() }
        }
        // The same configuration and objects (a fresher token is fine): the same instance.
        let fresher = variant(server.baseUrl, 5, nil, "fresher")
        let task = try await SendOnce.shared(fresher, tokenProvider: provider, transport: pinned)
        XCTAssertTrue(ui === task)
        ui.close()
        let t = try await task.sendTransfer(to: bob.id, amountMinor: 700, currency: "BDT")
        let done = try await task.outcome(of: t.localId)
        XCTAssertEqual(done.state, .succeeded)
        task.close()
        await assertThrows({ if case .Closed = $0 { return true }; return false }, "closed by its last holder") {
            try await task.unfinishedTransfers()
        }
    }

    /// The helper executable `SendOnceHoldFile` (built with the tests), or `SENDONCE_HOLD_FILE`.
    func holdFileBinary() throws -> URL {
        if let path = ProcessInfo.processInfo.environment["SENDONCE_HOLD_FILE"] { return URL(fileURLWithPath: path) }
        return try helperExecutable("SendOnceHoldFile", near: Self.self)
    }

    func testAnotherProcessOnTheFileIsBusyAndARetryOnceItIsGoneSucceeds() async throws {
        let db = server.dbPath("held")
        let child = Process()
        child.executableURL = try holdFileBinary()
        child.arguments = [db]
        let stdin = Pipe(), stdout = Pipe()
        child.standardInput = stdin
        child.standardOutput = stdout
        try child.run()
        defer { if child.isRunning { child.terminate() } }
        XCTAssertEqual(firstLine(of: stdout), "holding\n")
        let config = SendOnceConfig(baseUrl: "http://127.0.0.1:9", dbPath: db)
        // Busy, not AlreadyOpen or a storage error: the one a worker turns into "retry later".
        await assertThrows({ if case .Busy = $0 { return true }; return false }, "another process holds the file") {
            try await SendOnce.shared(config)
        }
        try stdin.fileHandleForWriting.close()
        child.waitUntilExit()
        XCTAssertEqual(child.terminationStatus, 0)
        let sdk = try await SendOnce.shared(config)
        sdk.close()
    }

    func testConfirmedOfflineBackgroundedThenDrainedSucceeds() async throws {
        let alice = try await server.createUser("alice", balanceMinor: 1_000_000)
        let bob = try await server.createUser("bob")
        let sdk = try await SendOnce.shared(config(alice))
        defer { sdk.close() }
        try await sdk.setNetworkAvailable(false)
        let t = try await sdk.sendTransfer(to: bob.id, amountMinor: 2_500, currency: "BDT")
        try sdk.setInForeground(false)
        let pending = try await sdk.transfer(t.localId)
        XCTAssertEqual(pending.state, .pending)
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
        let slow = NetworkProfile.custom(settings: NetsimSettings(latency: 1.5))
        let sdk = try await SendOnce.shared(config(alice, profile: slow))
        defer { sdk.close() }
        try await sdk.setNetworkAvailable(false)
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
            lock.withLock { asked.append(forceRefresh) }
            return token
        }
    }

    func testA401AsksTheProviderOnceAndRetriesWithTheSameKey() async throws {
        let alice = try await server.createUser("alice", balanceMinor: 1_000_000)
        let bob = try await server.createUser("bob")
        let provider = Provider(alice.token)
        let sdk = try await SendOnce.open(config(alice, token: "expired"), tokenProvider: provider, transport: nil)
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
            lock.withLock { asked += 1 }
            throw URLError(.userAuthenticationRequired)
        }
    }

    func testAProviderThatThrowsParksTheTransferInAuthRequired() async throws {
        let alice = try await server.createUser("alice", balanceMinor: 1_000_000)
        let bob = try await server.createUser("bob")
        let provider = Failing()
        let sdk = try await SendOnce.open(config(alice, token: "expired"), tokenProvider: provider, transport: nil)
        defer { sdk.close() }
        let t = try await sdk.sendTransfer(to: bob.id, amountMinor: 1_000, currency: "BDT")
        for _ in 0..<3000 where try await sdk.transfer(t.localId).state != .authRequired {
            try await Task.sleep(nanoseconds: 10_000_000)
        }
        let parked = try await sdk.transfer(t.localId)
        XCTAssertEqual(parked.state, .authRequired)
        XCTAssertEqual(provider.asked, 1)
        try await sdk.setAccessToken(alice.token)
        let done = try await sdk.outcome(of: t.localId)
        XCTAssertEqual(done.state, .succeeded)
        XCTAssertEqual(done.idempotencyKey, t.idempotencyKey)
    }

    func testAnotherAccountIsRefusedAndSignOutRefusesUnlessForced() async throws {
        let alice = try await server.createUser("alice", balanceMinor: 1_000_000)
        let bob = try await server.createUser("bob")
        let sdk = try await SendOnce.open(config(alice, accountId: "acct-swift-alice"))
        defer { sdk.close() }
        let bound = try await sdk.accountId()
        XCTAssertEqual(bound, "acct-swift-alice")
        try await sdk.setNetworkAvailable(false)
        let t = try await sdk.sendTransfer(to: bob.id, amountMinor: 300, currency: "BDT")
        await assertThrows({ if case .AccountMismatch = $0 { return true }; return false }, "another account") {
            try await sdk.signIn(accountId: "acct-swift-bob", token: bob.token)
        }
        await assertThrows({ if case .UnfinishedTransfers = $0 { return true }; return false }, "sign-out") {
            try await sdk.signOut()
        }
        let report = try await sdk.signOut(force: true)
        XCTAssertEqual(report.discardedUnfinished.map(\.localId), [t.localId])
        XCTAssertTrue(sdk.currentTransfers.isEmpty)
        let left = try await sdk.accountId()
        XCTAssertNil(left)
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
        let sdk = try await SendOnce.open(config(alice), tokenProvider: nil, transport: URLSessionTransport())
        defer { sdk.close() }
        let token = try sdk.addEventListener { lines.add($0) }
        defer { token.cancel() }
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
