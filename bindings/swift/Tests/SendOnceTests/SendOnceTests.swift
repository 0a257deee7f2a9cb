import SendOnceTestSupport
import Foundation
import XCTest
@testable import SendOnce
@_spi(SendOnceInternal) import SendOnceFFI  // the raw core, where a test needs it

/// The Swift bindings against the real Rust library and the real server-mock on loopback.
final class SendOnceTests: ServerTestCase {
    let fastRetry = RetryPolicy(base: 0.02, cap: 0.3, giveUpAfter: 86_400, jitter: true, budgetBurst: 1000, budgetPerSecond: 1000)

    func config(
        _ user: User, dbPath: String? = nil, profile: NetworkProfile? = nil, clockSpeed: Double = 1.0, fast: Bool = true,
        retry: RetryPolicy? = nil, baseUrl: String? = nil, requestTimeout: TimeInterval = 5
    ) -> SendOnceConfig {
        SendOnceConfig(
            baseUrl: baseUrl ?? server.baseUrl, dbPath: dbPath ?? server.dbPath(), accessToken: AccessToken(value: user.token),
            retry: retry ?? (fast ? fastRetry : nil), requestTimeout: requestTimeout, networkProfile: profile, clockSpeed: clockSpeed
        )
    }

    func pair(balance: Int64 = 1_000_000) async throws -> (User, User) {
        (try await server.createUser("alice", balanceMinor: balance), try await server.createUser("bob"))
    }

    func testAConfigNeverPrintsItsAccessToken() {
        let config = SendOnceConfig(
            baseUrl: "https://api.example.com", dbPath: "x.db", accessToken: AccessToken(value: "tok_secret_123"))
        let printed = String(describing: config) + String(reflecting: config)
        XCTAssertFalse(printed.contains("tok_secret_123"), printed)
    }

    func testSendAndSucceed() async throws {
        let (alice, bob) = try await pair()
        let sdk = try await SendOnce.open(config(alice))
        defer { sdk.close() }
        let sent = try await sdk.sendTransfer(to: bob.id, amountMinor: 12_345, currency: "BDT", note: "rent")
        XCTAssertFalse(sent.idempotencyKey.isEmpty)
        let done = try await sdk.outcome(of: sent.localId)
        XCTAssertEqual(done.state, .succeeded)
        XCTAssertTrue(done.state.isFinal)
        XCTAssertNotNil(done.serverTransferId)
        XCTAssertEqual(done.idempotencyKey, sent.idempotencyKey)
        // The stream of transfer lists, built on the listener, reaches the same state.
        for await list in sdk.transfers where list.contains(where: { $0.localId == sent.localId && $0.state == .succeeded }) {
            XCTAssertEqual(list.count, 1)
            break
        }
        let debits = try await server.debits(sent.idempotencyKey)
        XCTAssertEqual(debits.count, 1)
        let aliceBalance = try await server.balance(alice)
        let bobBalance = try await server.balance(bob)
        XCTAssertEqual(aliceBalance, 1_000_000 - 12_345)
        XCTAssertEqual(bobBalance, 12_345)
    }

    func testComposerDoubleConfirmReturnsSameTransferAndSendStaysDisabledUntilDone() async throws {
        let (alice, bob) = try await pair()
        // Latency keeps the first attempt in flight while the user taps again.
        let slow = NetworkProfile.custom(settings: NetsimSettings(latency: 0.4))
        let sdk = try await SendOnce.open(config(alice, profile: slow))
        defer { sdk.close() }
        let composer = try await sdk.composer()
        defer { composer.close() }
        XCTAssertEqual(composer.state, .editing)
        XCTAssertTrue(composer.sendEnabled)
        let request = TransferRequest(toUserId: bob.id, amountMinor: 500, currency: "BDT")
        // Two taps racing each other, then a third with other fields: one intent, one transfer.
        async let a = composer.confirm(request)
        async let b = composer.confirm(request)
        let taps = try await [a, b]
        XCTAssertFalse(composer.sendEnabled, "Send must be disabled right after confirm")
        let other = TransferRequest(toUserId: bob.id, amountMinor: 999, currency: "BDT")
        let third = try await composer.confirm(other)
        let all = taps + [third]
        XCTAssertEqual(Set(all.map(\.localId)).count, 1, "one transfer for every tap")
        XCTAssertEqual(Set(all.map(\.idempotencyKey)).count, 1, "one key for every tap")

        // Every state between the confirm and Done keeps Send disabled.
        var seen: [ComposerState] = []
        for await state in composer.states() {
            if case .done = state { break }
            seen.append(state)
        }
        XCTAssertTrue(seen.allSatisfy { !$0.sendEnabled }, "Send enabled before done: \(seen)")
        guard case let .done(receipt) = composer.state else { return XCTFail("not done: \(composer.state)") }
        XCTAssertFalse(composer.sendEnabled, "after Done, Send stays off until a new intent")
        XCTAssertEqual(receipt.localId, taps[0].localId)
        let debits = try await server.debits(receipt.idempotencyKey)
        XCTAssertEqual(debits.count, 1)
        XCTAssertEqual(sdk.currentTransfers.count, 1)

        try await composer.newIntent()
        XCTAssertEqual(composer.state, .editing)
        XCTAssertTrue(composer.sendEnabled)
    }

    func testTrainProfileSettlesWithOneDebitPerTransfer() async throws {
        let (alice, bob) = try await pair()
        // The real Train profile (tunnels, 30 % of answers lost, seconds of latency, replays) on a clock
        // running 50x: its minutes of tunnels and 15 s timeouts pass in about a second.
        let sdk = try await SendOnce.open(config(alice, clockSpeed: 50, fast: false))
        defer { sdk.close() }
        try await sdk.setNetworkProfile(.train, seed: 7)
        let profile = try await sdk.networkProfile()
        XCTAssertEqual(profile, .train)
        var sent: [Transfer] = []
        for i in 1...8 {
            sent.append(try await sdk.sendTransfer(to: bob.id, amountMinor: Int64(100 * i), currency: "BDT"))
        }
        var outcomes: [Transfer] = []
        for t in sent {
            outcomes.append(try await sdk.outcome(of: t.localId))
        }
        let stats = try await sdk.networkStats()
        print("train: \(stats), attempts \(outcomes.map(\.attempts))")
        XCTAssertTrue(outcomes.allSatisfy { $0.state == .succeeded }, "\(outcomes.map(\.state))")
        XCTAssertGreaterThanOrEqual(stats.requests, 8)
        for t in outcomes {
            let debits = try await server.debits(t.idempotencyKey)
            XCTAssertEqual(debits.count, 1, "one debit for \(t.idempotencyKey)")
            XCTAssertEqual(debits.first?.transferId, t.serverTransferId)
        }
        let balance = try await server.balance(alice)
        XCTAssertEqual(balance, 1_000_000 - sent.map(\.amountMinor).reduce(0, +))
    }

    func testCloseAndReopenResumesUnfinishedTransferWithSameKey() async throws {
        let (alice, bob) = try await pair()
        let db = server.dbPath("reopen")
        let first = try await SendOnce.open(config(alice, dbPath: db, profile: .offline))
        let sent = try await first.sendTransfer(to: bob.id, amountMinor: 777, currency: "BDT")
        // Offline: it keeps retrying and nothing reaches the server.
        for await t in first.transferUpdates(of: sent.localId) where t.attempts >= 1 {
            break
        }
        let unfinished = try await first.transfer(sent.localId)
        XCTAssertFalse(unfinished.state.isFinal)
        first.close()
        await assertThrows({ $0 == .Closed }, "after close") { try await first.transfer(sent.localId) }
        let before = try await server.debits(sent.idempotencyKey)
        XCTAssertTrue(before.isEmpty)

        let second = try await SendOnce.open(config(alice, dbPath: db))
        defer { second.close() }
        let unfinishedIds = try await second.unfinishedTransfers().map(\.localId)
        XCTAssertEqual(unfinishedIds, [sent.localId])
        // The confirm screen re-attaches to the transfer: Send stays off, the receipt arrives.
        let screen = try await second.composer(for: sent.localId)
        defer { screen.close() }
        XCTAssertFalse(screen.sendEnabled)
        for await state in screen.states() {
            if case let .done(receipt) = state {
                XCTAssertEqual(receipt.localId, sent.localId)
                break
            }
        }
        let done = try await second.outcome(of: sent.localId)
        XCTAssertEqual(done.state, .succeeded)
        XCTAssertEqual(done.idempotencyKey, sent.idempotencyKey)
        let debits = try await server.debits(sent.idempotencyKey)
        XCTAssertEqual(debits.count, 1)
        let aliceDebits = try await server.ledger().filter { $0.kind == "debit" && $0.userId == alice.id }
        XCTAssertEqual(aliceDebits.count, 1)
    }

    func testPastGiveUpHorizonNeedsAttentionAndResolveLooksUpByKey() async throws {
        let (alice, bob) = try await pair()
        let shortHorizon = RetryPolicy(base: 0.02, cap: 0.3, giveUpAfter: 0.3, jitter: true, budgetBurst: 1000, budgetPerSecond: 1000)
        let sdk = try await SendOnce.open(config(alice, profile: .offline, retry: shortHorizon))
        defer { sdk.close() }
        let sent = try await sdk.sendTransfer(to: bob.id, amountMinor: 42, currency: "BDT")
        let parked = try await sdk.outcome(of: sent.localId)
        XCTAssertEqual(parked.state, .needsAttention)
        XCTAssertTrue(parked.state.isSettled)
        XCTAssertFalse(parked.state.isFinal)
        // Back online: the look-up by key finds that the server never executed it; no new key, no send.
        try await sdk.setNetworkProfile(.off)
        let resolved = try await sdk.resolve(sent.localId)
        XCTAssertEqual(resolved.state, .failed)
        XCTAssertEqual(resolved.rejection?.code, "not_executed")
        XCTAssertEqual(resolved.idempotencyKey, sent.idempotencyKey)
        let debits = try await server.debits(sent.idempotencyKey)
        XCTAssertTrue(debits.isEmpty)
    }

    func testThrowingListenerDoesNotCrashTheSdk() async throws {
        let (alice, bob) = try await pair()
        // Straight on the generated API: the Swift error crosses back into Rust as a ListenerError and is logged.
        let core = try SendOnceCore.open(config: config(alice))
        let calls = Counter()
        _ = try core.addListener(listener: ThrowingTransferListener(calls))
        let composer = try core.composer()
        try composer.setListener(listener: ThrowingComposerListener(calls))
        let t = try await composer.confirm(request: TransferRequest(toUserId: bob.id, amountMinor: 10, currency: "BDT"))
        let first = try await core.waitForOutcome(localId: t.localId)
        XCTAssertEqual(first.state, .succeeded)
        let again = try await core.sendTransfer(request: TransferRequest(toUserId: bob.id, amountMinor: 11, currency: "BDT"))
        let second = try await core.waitForOutcome(localId: again.localId)
        XCTAssertEqual(second.state, .succeeded)
        XCTAssertGreaterThanOrEqual(calls.value, 4, "listeners were called")
        try composer.setListener(listener: nil)
        try core.shutdown()

        // Through the idiomatic layer: the callback throws, the streams keep working.
        let sdk = try await SendOnce.open(config(alice))
        defer { sdk.close() }
        let seen = Counter()
        let token = sdk.addListener { _ in
            seen.increment()
            throw TestError("boom")
        }
        defer { token.cancel() }
        let t2 = try await sdk.sendTransfer(to: bob.id, amountMinor: 12, currency: "BDT")
        for await t in sdk.transferUpdates(of: t2.localId) where t.state == .succeeded {
            break
        }
        XCTAssertGreaterThanOrEqual(seen.value, 1)
    }

    func testBadInputSurfacesAsTypedError() async throws {
        let (alice, bob) = try await pair()
        let db = server.dbPath()
        let sdk = try await SendOnce.open(config(alice, dbPath: db))
        defer { sdk.close() }
        func isAmount(_ e: SendOnceError) -> Bool { if case .InvalidAmount = e { return true }; return false }
        await assertThrows(isAmount, "zero") { try await sdk.sendTransfer(to: bob.id, amountMinor: 0, currency: "BDT") }
        await assertThrows(isAmount, "negative") { try await sdk.sendTransfer(to: bob.id, amountMinor: -5, currency: "BDT") }
        await assertThrows({ if case .InvalidCurrency = $0 { return true }; return false }, "currency") {
            try await sdk.sendTransfer(to: bob.id, amountMinor: 10, currency: "bdt")
        }
        await assertThrows({ if case .InvalidRecipient = $0 { return true }; return false }, "recipient") {
            try await sdk.sendTransfer(to: "", amountMinor: 10, currency: "BDT")
        }
        await assertThrows({ if case .InvalidNote = $0 { return true }; return false }, "note") {
            try await sdk.sendTransfer(to: bob.id, amountMinor: 10, currency: "BDT", note: String(repeating: "x", count: 141))
        }
        await assertThrows({ if case .NotFound = $0 { return true }; return false }, "not found") { try await sdk.transfer("no-such-id") }
        await assertThrows({ if case .InvalidConfig = $0 { return true }; return false }, "rate") {
            try await sdk.setNetworkProfile(.custom(settings: NetsimSettings(dropRequestRate: 2)))
        }
        let composer = try await sdk.composer()
        defer { composer.close() }
        await assertThrows(isAmount, "composer") { try await composer.confirm(to: bob.id, amountMinor: 0, currency: "BDT") }
        XCTAssertTrue(composer.sendEnabled, "a refused confirm leaves Send enabled")
        await assertThrows({ if case .AlreadyOpen = $0 { return true }; return false }, "second open") {
            try await SendOnce.open(self.config(alice, dbPath: db))
        }
        XCTAssertTrue(sdk.currentTransfers.isEmpty, "nothing was persisted")
        do {
            _ = try await sdk.sendTransfer(to: bob.id, amountMinor: 10, currency: "XX")
            XCTFail("no error")
        } catch let SendOnceError.InvalidCurrency(detail) {
            XCTAssertTrue(detail.contains("XX"), detail)
        }

        let badUrl = config(alice, baseUrl: "ftp://nowhere")
        await assertThrows({ if case .InvalidConfig = $0 { return true }; return false }, "url") { try await SendOnce.open(badUrl) }
        let zeroTimeout = config(alice, requestTimeout: 0)
        await assertThrows({ if case .InvalidConfig = $0 { return true }; return false }, "timeout") { try await SendOnce.open(zeroTimeout) }
    }

    /// A negative, infinite or NaN span is a typed `InvalidConfig`, not a crash: uniffi's lowering of a
    /// `TimeInterval` calls `fatalError` on them (this test killed the whole XCTest process before
    /// `checkSpans`).
    func testSpansThatCannotCrossAreTypedErrorsNotCrashes() async throws {
        let (alice, _) = try await pair()
        func isConfig(_ e: SendOnceError) -> Bool { if case .InvalidConfig = e { return true }; return false }
        for bad in [-1, -.infinity, .infinity, .nan] as [TimeInterval] {
            await assertThrows(isConfig, "requestTimeout \(bad)") {
                try await SendOnce.open(self.config(alice, requestTimeout: bad))
            }
            await assertThrows(isConfig, "shared \(bad)") {
                try await SendOnce.shared(self.config(alice, requestTimeout: bad))
            }
        }
        let sdk = try await SendOnce.open(config(alice, dbPath: server.dbPath()))
        defer { sdk.close() }
        await assertThrows(isConfig, "latency") {
            try await sdk.setNetworkProfile(.custom(settings: NetsimSettings(latency: -0.5)))
        }
        await assertThrows(isConfig, "drain") { _ = try await sdk.drain(deadline: -1 as TimeInterval) }
        let summary = try await sdk.drain(deadline: 0 as TimeInterval)
        XCTAssertTrue(summary.unfinished.isEmpty, "the SDK still works after refusing them")
    }

    /// Consumers that stop iterating while the SDK publishes from its own threads must never deadlock
    /// (regression: yielding under the same lock that `onTermination` takes).
    func testStreamsCanBeAbandonedWhileChangesFlow() async throws {
        let (alice, bob) = try await pair()
        let busyRetry = RetryPolicy(base: 0.001, cap: 0.002, giveUpAfter: 86_400, jitter: true, budgetBurst: 100_000, budgetPerSecond: 100_000)
        let sdk = try await SendOnce.open(config(alice, profile: .offline, retry: busyRetry))
        defer { sdk.close() }
        let composer = try await sdk.composer()
        defer { composer.close() }
        let t = try await composer.confirm(to: bob.id, amountMinor: 5, currency: "BDT")
        for i in 0..<10 {
            _ = try await sdk.sendTransfer(to: bob.id, amountMinor: Int64(10 + i), currency: "BDT")
        }
        // Offline with a 1 ms backoff: hundreds of state changes a second while consumers come and go.
        for _ in 0..<500 {
            for await _ in sdk.transfers { break }
            for await _ in sdk.transferUpdates(of: t.localId) { break }
            for await _ in composer.states() { break }
        }
        try await sdk.setNetworkProfile(.off)
        for transfer in try await sdk.transfers(after: nil, limit: 500) {
            let done = try await sdk.outcome(of: transfer.localId)
            XCTAssertEqual(done.state, .succeeded)
        }
    }

    func testListStaysWholeWhenASlowListenerMakesTheCoreDropDeliveries() async throws {
        let (alice, bob) = try await pair()
        let sdk = try await SendOnce.open(config(alice))
        defer { sdk.close() }
        try await sdk.setNetworkAvailable(false) // each transfer changes once: confirmed, pending
        let release = DispatchSemaphore(value: 0)
        // Holds the SDK's delivery thread: its 1,024-item buffer overflows.
        let token = sdk.addListener { _ in release.wait(); release.signal() }
        var sent = Set<String>()
        for i in 1...1_500 {
            sent.insert(try await sdk.sendTransfer(to: bob.id, amountMinor: Int64(i), currency: "BDT").localId)
        }
        release.signal()
        // Without the core resending every state after a lag, the list stays short for good
        // (sdk/tests/lagging_listener.rs fails so without it).
        for _ in 0..<2_000 where sdk.currentTransfers.count < sent.count {
            try await Task.sleep(nanoseconds: 10_000_000) // bounded: at most 20 s
        }
        XCTAssertEqual(Set(sdk.currentTransfers.map(\.localId)), sent)
        token.cancel()
    }

    func testFileFromNewerSdkIsItsOwnTypedErrorAndLeftUntouched() async throws {
        let (alice, _) = try await pair()
        // The golden schema-2 file of the Rust tests, its user_version (big-endian at offset 60) set to 99.
        let root = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
        var bytes = try Data(contentsOf: root.appendingPathComponent("sdk/tests/golden/store-v2.db"))
        bytes.replaceSubrange(60..<64, with: [0, 0, 0, 99])
        let db = server.dbPath("newer")
        try bytes.write(to: URL(fileURLWithPath: db))
        await assertThrows({
            if case let .StorageFromNewerVersion(found, supported) = $0 { return found == 99 && supported == 3 }
            return false
        }, "newer") {
            try await SendOnce.open(self.config(alice, dbPath: db))
        }
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: db)), bytes, "every byte as it was")
        XCTAssertEqual(SendOnceError.StorageFromNewerVersion(found: 99, supported: 3).messageKey,
                       "sendonce.error.storage_from_newer_version")
    }

    func testCorruptDatabaseIsTypedErrorNotCrash() async throws {
        let (alice, _) = try await pair()
        let db = server.dbPath("corrupt")
        var generator = SystemRandomNumberGenerator()
        let garbage = Data((0..<16 * 1024).map { _ in UInt8.random(in: 0...255, using: &generator) })
        try garbage.write(to: URL(fileURLWithPath: db))
        await assertThrows({ if case .StorageCorrupt = $0 { return true }; return false }, "corrupt") {
            try await SendOnce.open(self.config(alice, dbPath: db))
        }
        // A directory where the file should be: also a typed error.
        let dir = server.dir.appendingPathComponent("a-directory.db")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        await assertThrows({ _ in true }, "directory") { try await SendOnce.open(self.config(alice, dbPath: dir.path)) }
        // The process is still fine: a good file opens.
        let sdk = try await SendOnce.open(config(alice))
        XCTAssertTrue(sdk.currentTransfers.isEmpty)
        sdk.close()
    }
}

final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var n = 0
    var value: Int { lock.lock(); defer { lock.unlock() }; return n }
    func increment() { lock.lock(); n += 1; lock.unlock() }
}

final class ThrowingTransferListener: TransferListener, @unchecked Sendable {
    let calls: Counter
    init(_ calls: Counter) { self.calls = calls }
    func onTransferChanged(transfer: Transfer) throws {
        calls.increment()
        throw TestError("listener bug")
    }
}

final class ThrowingComposerListener: ComposerListener, @unchecked Sendable {
    let calls: Counter
    init(_ calls: Counter) { self.calls = calls }
    func onStateChanged(state: ComposerState) throws {
        calls.increment()
        throw TestError("composer listener bug")
    }
}
