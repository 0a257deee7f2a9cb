import Foundation
import SendOnceTestSupport
import XCTest
@testable import SendOnce
@_spi(SendOnceInternal) import SendOnceFFI  // the raw core and IoProbe, for the main-safety controls

/// What makes the Swift layer platform-native: MainActor safety, cancellation, typed errors and reasons,
/// Dates, streams that end, listener tokens, paging and the privacy manifest.
final class IdiomTests: ServerTestCase {
    let fastRetry = RetryPolicy(base: 0.02, cap: 0.3, giveUpAfter: 86_400, jitter: true, budgetBurst: 1000, budgetPerSecond: 1000)

    func config(_ user: User, dbPath: String? = nil, profile: NetworkProfile? = nil) -> SendOnceConfig {
        SendOnceConfig(
            baseUrl: server.baseUrl, dbPath: dbPath ?? server.dbPath(), accessToken: AccessToken(value: user.token),
            retry: fastRetry, networkProfile: profile
        )
    }

    func users(balance: Int64) async throws -> (User, User) {
        (try await server.createUser("alice", balanceMinor: balance), try await server.createUser("bob"))
    }

    /// The profile a screen reads is memory, equals the core's after concurrent switches, and its stream
    /// ends when the SDK closes.
    func testTheNetworkProfileAScreenReadsIsTheCoresAfterConcurrentSwitches() async throws {
        let alice = try await server.createUser("alice-profile")
        let sdk = try await SendOnce.open(config(alice, profile: .offline))
        XCTAssertEqual(sdk.currentNetworkProfile, .offline) // the config's, read at open
        let updates = sdk.networkProfileUpdates()
        let profiles: [NetworkProfile] = [.off, .train, .offline]
        for round in 0..<20 {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for i in 0..<8 {
                    group.addTask { try await sdk.setNetworkProfile(profiles[(round + i) % profiles.count], seed: UInt64(i)) }
                }
                try await group.waitForAll()
            }
            let core = try await sdk.networkProfile()
            XCTAssertEqual(core, sdk.currentNetworkProfile, "round \(round)")
        }
        let last = sdk.currentNetworkProfile
        sdk.close()
        var seen: [NetworkProfile] = []
        for await p in updates { seen.append(p) } // ends: close finished the stream (newest kept only)
        XCTAssertEqual(seen.last, last)
        XCTAssertEqual(sdk.currentNetworkProfile, last)
    }

    /// Every public call made from the MainActor; the probe records the thread of each store transaction
    /// and each send, and none may be the main thread.
    @MainActor
    func testNoPublicCallDoesIoOnTheMainActor() async throws {
        let server = Self.shared!
        let alice = try await server.createUser("alice", balanceMinor: 1_000_000)
        let bob = try await server.createUser("bob")
        let main = currentThreadLabel()
        let probe = IoProbe.start()
        defer { probe.stop() }
        let db = server.dbPath()
        let sdk = try await SendOnce.open(config(alice, dbPath: db))
        let sent = try await sdk.sendTransfer(to: bob.id, amountMinor: 100, currency: "BDT")
        _ = try await sdk.transfer(sent.localId)
        let page: Int = 10 // a Swift count is an Int (was UInt32)
        let firstPage = try await sdk.transfers(after: nil, limit: page)
        XCTAssertEqual(firstPage.count, 1)
        let none = try await sdk.transfers(after: nil, limit: -1)
        XCTAssertEqual(none.count, 0, "a negative limit reads as 0")
        _ = try await sdk.unfinishedTransfers()
        _ = try await sdk.outcome(of: sent.localId)
        try await sdk.setNetworkAvailable(false)
        try await sdk.setNetworkAvailable(true)
        try await sdk.setAccessToken(alice.token)
        try await sdk.setNetworkProfile(.off)
        _ = try await sdk.networkProfile()
        _ = sdk.currentNetworkProfile
        for await _ in sdk.networkProfileUpdates() { break }
        _ = try await sdk.networkStats()
        let composer = try await sdk.composer()
        _ = try await composer.confirm(to: bob.id, amountMinor: 200, currency: "BDT")
        for await state in composer.states() {
            if case .done = state { break }
        }
        _ = try await composer.transfer()
        try await composer.newIntent()
        composer.close()
        let again = try await sdk.composer(for: sent.localId)
        again.close()
        // The background and account calls too.
        try sdk.addEventListener { _ in }.cancel()
        try sdk.setInForeground(false)
        _ = try await sdk.drain(deadline: 10)
        try sdk.setInForeground(true)
        _ = try await sdk.accountId()
        _ = try await sdk.signIn(accountId: "acct-main-safety", token: alice.token)
        sdk.close()
        let shared = try await SendOnce.shared(config(alice, dbPath: db))
        _ = try await shared.drain(deadline: 10)
        _ = try await shared.signOut(force: true)
        shared.close()
        _ = try await SendOnce.wipe(dbPath: db, force: true)
        XCTAssertEqual(currentThreadLabel(), main, "the test ran on one thread")
        let events = probe.events()
        XCTAssertTrue(events.contains { $0.kind == .store }, "store transactions recorded")
        XCTAssertTrue(events.contains { $0.kind == .send }, "sends recorded")
        let onMain = events.filter { $0.thread == main }
        XCTAssertTrue(onMain.isEmpty, "I/O on the main thread: \(onMain)")

        // Control: the generated synchronous call does its store I/O right here, and the probe says so.
        let core = try SendOnceCore.open(config: config(alice))
        _ = try core.transfers()
        try core.shutdown()
        XCTAssertTrue(probe.events().contains { $0.thread == main && $0.kind == .store }, "the control saw its I/O")
    }

    func testOutcomeHonoursTaskCancellation() async throws {
        let (alice, bob) = try await users(balance: 1_000)
        let sdk = try await SendOnce.open(config(alice, profile: .offline))
        defer { sdk.close() }
        let sent = try await sdk.sendTransfer(to: bob.id, amountMinor: 10, currency: "BDT")
        // Offline: the outcome never comes; cancelling the task must end the wait.
        let waiting = Task { try await sdk.outcome(of: sent.localId) }
        waiting.cancel()
        do {
            _ = try await waiting.value
            XCTFail("an offline transfer has no outcome")
        } catch is CancellationError {
        }
        // Cancelled before the call: ends at once too.
        let early = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await sdk.outcome(of: sent.localId)
        }
        do {
            _ = try await early.value
            XCTFail("cancelled before the call")
        } catch is CancellationError {
        }
    }

    /// Swift Task cancellation does not reach a Rust future (uniffi polls it to the end), so the layer passes
    /// a `CancelSignal`: cancelling it ends the Rust wait itself, with `Cancelled`. Without the signal this
    /// offline wait would last until shutdown.
    func testACancelSignalEndsTheRustWait() async throws {
        let (alice, bob) = try await users(balance: 1_000)
        let core = try SendOnceCore.open(config: config(alice, profile: .offline))
        defer { try? core.shutdown() }
        let sent = try await core.sendTransfer(request: TransferRequest(toUserId: bob.id, amountMinor: 10, currency: "BDT"))
        let signal = CancelSignal()
        let waiting = Task { try await core.waitForOutcome(localId: sent.localId, cancel: signal) }
        signal.cancel()
        do {
            _ = try await waiting.value
            XCTFail("an offline transfer has no outcome")
        } catch SendOnceError.Cancelled {
        }
        XCTAssertTrue(signal.isCancelled())
        let drained = Task { try await core.drain(deadline: 30, cancel: signal) }
        do {
            _ = try await drained.value
            XCTFail("a drain with a cancelled signal does not run")
        } catch SendOnceError.Cancelled {
        }
        let unfinished = try core.unfinishedTransfers()
        XCTAssertEqual(unfinished.map(\.localId), [sent.localId], "cancelling a wait undoes nothing")
    }

    func testStreamsFinishWhenTheSdkCloses() async throws {
        let (alice, bob) = try await users(balance: 1_000)
        let sdk = try await SendOnce.open(config(alice, profile: .offline))
        let composer = try await sdk.composer()
        let sent = try await composer.confirm(to: bob.id, amountMinor: 10, currency: "BDT")
        let lists = Task { var n = 0; for await _ in sdk.transfers { n += 1 }; return n }
        let states = Task { var n = 0; for await _ in composer.states() { n += 1 }; return n }
        let one = Task { var n = 0; for await _ in sdk.transferUpdates(of: sent.localId) { n += 1 }; return n }
        for await t in sdk.transferUpdates(of: sent.localId) where t.attempts >= 1 { break }
        sdk.close()
        // Each loop ends instead of hanging (the closed SDK also closed its composer).
        let counts = await (lists.value, states.value, one.value)
        XCTAssertGreaterThan(counts.0 + counts.1 + counts.2, 0)
        do {
            _ = try await composer.confirm(to: bob.id, amountMinor: 10, currency: "BDT")
            XCTFail("a composer of a closed SDK refuses")
        } catch SendOnceError.Closed {
        }
    }

    func testAListenerTokenUnregistersOnDeinitAndDeliversTheChangedTransfer() async throws {
        let (alice, bob) = try await users(balance: 1_000_000)
        let sdk = try await SendOnce.open(config(alice))
        defer { sdk.close() }
        let kept = Locked<[Transfer]>([])
        let dropped = Locked(0)
        let token = sdk.addListener { t in kept.withLock { $0.append(t) } }
        do {
            _ = sdk.addListener { _ in dropped.withLock { $0 += 1 } } // released at once
        }
        let sent = try await sdk.sendTransfer(to: bob.id, amountMinor: 10, currency: "BDT")
        let done = try await sdk.outcome(of: sent.localId)
        for await list in sdk.transfers where list.first?.state == .succeeded { break }
        token.cancel()
        XCTAssertEqual(dropped.withLock { $0 }, 0, "a released token unregistered its listener")
        let delivered = kept.withLock { $0 }
        XCTAssertTrue(delivered.allSatisfy { $0.localId == sent.localId })
        XCTAssertEqual(delivered.last, done, "the listener got the changed transfer itself")
    }

    func testErrorsKeepTheirFieldsAndHaveKeys() async throws {
        let (alice, bob) = try await users(balance: 1_000)
        let sdk = try await SendOnce.open(config(alice))
        defer { sdk.close() }
        do {
            _ = try await sdk.transfer("no-such-id")
            XCTFail("no error")
        } catch let SendOnceError.NotFound(localId) {
            XCTAssertEqual(localId, "no-such-id")
            XCTAssertEqual(SendOnceError.NotFound(localId: localId).messageKey, "sendonce.error.not_found")
        }
        do {
            _ = try await sdk.sendTransfer(to: bob.id, amountMinor: SendOnce.maxAmountMinor + 1, currency: "BDT")
            XCTFail("no error")
        } catch let error as SendOnceError {
            XCTAssertEqual(error.messageKey, "sendonce.error.invalid_amount")
            // With no translation in the app's table, the description is the key: never an English sentence.
            XCTAssertEqual(error.localizedDescription, "sendonce.error.invalid_amount")
        }
    }

    func testARejectionCarriesATypedReason() async throws {
        let (alice, bob) = try await users(balance: 1_000)
        let sdk = try await SendOnce.open(config(alice))
        defer { sdk.close() }
        let poor = try await sdk.outcome(of: try await sdk.sendTransfer(to: bob.id, amountMinor: 5_000, currency: "BDT").localId)
        XCTAssertEqual(poor.state, .rejected)
        XCTAssertEqual(poor.rejection?.reason, .insufficientFunds)
        XCTAssertEqual(poor.rejection?.code, "insufficient_funds")
        XCTAssertEqual(poor.rejection?.reason.messageKey, "sendonce.rejection.insufficient_funds")
        let nobody = try await sdk.outcome(of: try await sdk.sendTransfer(to: "usr_nobody", amountMinor: 10, currency: "BDT").localId)
        XCTAssertEqual(nobody.rejection?.reason, .recipientNotFound)
        XCTAssertEqual(RejectionReason.other(code: "card_blocked").messageKey, "sendonce.rejection.other")
    }

    func testTimesAreDatesAndPagesCoverTheHistoryOnce() async throws {
        let (alice, bob) = try await users(balance: 1_000_000)
        let before = Date().addingTimeInterval(-1)
        let sdk = try await SendOnce.open(config(alice))
        defer { sdk.close() }
        var sent: [Transfer] = []
        for i in 1...5 {
            sent.append(try await sdk.sendTransfer(to: bob.id, amountMinor: Int64(10 * i), currency: "BDT"))
        }
        for t in sent {
            let done = try await sdk.outcome(of: t.localId)
            XCTAssertTrue(done.createdAt >= before && done.createdAt <= Date(), "\(done.createdAt)")
            XCTAssertGreaterThanOrEqual(done.updatedAt, done.createdAt)
        }
        XCTAssertEqual(defaultRetryPolicy().giveUpAfter, 86_400)
        // Train mode's knobs are TimeIntervals too; an unnamed one is the simulator's default.
        let custom = networkProfileSettings(profile: .custom(settings: NetsimSettings(latency: 0.4)), seed: 3)
        XCTAssertEqual(custom?.latency, 0.4)
        XCTAssertEqual(custom?.tunnelEvery, 0)
        XCTAssertEqual(custom?.timeout, 15)
        var pages: [[Transfer]] = []
        var after: String?
        repeat {
            let page = try await sdk.transfers(after: after, limit: 2)
            pages.append(page)
            after = page.last?.localId
        } while !(pages.last?.isEmpty ?? true)
        XCTAssertEqual(pages.map(\.count), [2, 2, 1, 0])
        XCTAssertEqual(pages.flatMap { $0 }.map(\.localId), sent.reversed().map(\.localId), "newest first, each once")
        for await list in sdk.transfers where list.count == 5 && list.allSatisfy({ $0.state == .succeeded }) {
            let stored = try await sdk.transfers(after: nil, limit: 500)
            XCTAssertEqual(list, stored, "the stream's list, built from deliveries, equals the store's")
            break
        }
    }

    func testThePackageShipsThePrivacyManifest() throws {
        let url = try XCTUnwrap(Bundle.module.url(forResource: "PrivacyInfo", withExtension: "xcprivacy"))
        let plist = try XCTUnwrap(
            PropertyListSerialization.propertyList(from: Data(contentsOf: url), format: nil) as? [String: Any])
        XCTAssertEqual(plist["NSPrivacyTracking"] as? Bool, false)
        let apis = try XCTUnwrap(plist["NSPrivacyAccessedAPITypes"] as? [[String: Any]])
        let timestamp = try XCTUnwrap(apis.first { $0["NSPrivacyAccessedAPIType"] as? String == "NSPrivacyAccessedAPICategoryFileTimestamp" })
        XCTAssertEqual(timestamp["NSPrivacyAccessedAPITypeReasons"] as? [String], ["C617.1"])
        // The bundled SQLite's unixOpen calls fstatfs on Apple platforms (sqlite3.c:45305): DiskSpace.
        let disk = try XCTUnwrap(apis.first { $0["NSPrivacyAccessedAPIType"] as? String == "NSPrivacyAccessedAPICategoryDiskSpace" })
        XCTAssertEqual(disk["NSPrivacyAccessedAPITypeReasons"] as? [String], ["E174.1"])
    }
}
