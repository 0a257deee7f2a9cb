import SendOnceTestSupport
import Foundation
import XCTest
@testable import SendOnce

/// Background sending's decisions against the real core and server-mock, with recording stand-ins for
/// BGTaskScheduler and UIApplication (issue 31 point 4: before, the demo asked only for a BGProcessingTask,
/// which runs when the device is idle, and never for extra time around a send in flight).
final class BackgroundSendingTests: ServerTestCase {
    final class Platform: RefreshScheduling, BackgroundTimeGranting, @unchecked Sendable {
        private let lock = NSLock()
        private(set) var refreshes: [(String, Date)] = []
        private(set) var begun: [Int] = []
        private(set) var endedTokens: [Int] = []
        let expireAtOnce: Bool
        init(expireAtOnce: Bool = false) { self.expireAtOnce = expireAtOnce }

        func submitRefresh(identifier: String, earliestBegin: Date) throws {
            lock.lock(); refreshes.append((identifier, earliestBegin)); lock.unlock()
        }
        func beginTask(name: String, expiration: @escaping @Sendable () -> Void) -> Int {
            lock.lock(); let token = begun.count + 7; begun.append(token); lock.unlock()
            if expireAtOnce { expiration() }  // iOS takes the time back before beginTask even returns
            return token
        }
        func endTask(_ token: Int) { lock.lock(); endedTokens.append(token); lock.unlock() }
        var refreshCount: Int { lock.lock(); defer { lock.unlock() }; return refreshes.count }
    }

    func config(_ user: User, db: String, profile: NetworkProfile? = nil) -> SendOnceConfig {
        SendOnceConfig(
            baseUrl: server.baseUrl, dbPath: db, accessToken: AccessToken(value: user.token),
            retry: RetryPolicy(base: 0.02, cap: 0.3, giveUpAfter: 86_400, jitter: true, budgetBurst: 1000, budgetPerSecond: 1000),
            requestTimeout: 5, networkProfile: profile)
    }

    /// Alice with money, Bob, a database file, the recording platform and the helper over it.
    func rig(expireAtOnce: Bool = false) async throws -> (alice: User, bob: User, db: String, platform: Platform, background: BackgroundSending) {
        let alice = try await server.createUser("alice", balanceMinor: 100_000)
        let bob = try await server.createUser("bob")
        let platform = Platform(expireAtOnce: expireAtOnce)
        return (alice, bob, server.dbPath(), platform, BackgroundSending(scheduler: platform, time: platform))
    }

    func testATransferConfirmedOfflineAsksForARefreshAndOneLeftAtStartAsksAgain() async throws {
        let (alice, bob, db, platform, background) = try await rig()
        let sdk = try await SendOnce.open(config(alice, db: db, profile: .offline))
        let follow = background.attach(to: sdk)
        try await Task.sleep(nanoseconds: 100_000_000)
        XCTAssertEqual(platform.refreshCount, 0, "nothing unfinished at start: nothing to ask")
        _ = try await sdk.sendTransfer(to: bob.id, amountMinor: 5_000, currency: "BDT")
        for _ in 0..<500 where platform.refreshCount == 0 { try await Task.sleep(nanoseconds: 10_000_000) }
        XCTAssertEqual(platform.refreshes.map(\.0), ["io.sendonce.refresh"])
        follow.cancel()
        sdk.close()

        let reopened = try await SendOnce.open(config(alice, db: db, profile: .offline))
        defer { reopened.close() }
        let again = background.attach(to: reopened)
        for _ in 0..<500 where platform.refreshCount == 1 { try await Task.sleep(nanoseconds: 10_000_000) }
        again.cancel()
        XCTAssertEqual(platform.refreshCount, 2, "unfinished at start: asked again")
    }

    func testLeavingTheForegroundSendsInExtraTimeAndEndsItOnce() async throws {
        let (alice, bob, db, platform, background) = try await rig()
        let offline = try await SendOnce.open(config(alice, db: db, profile: .offline))
        let sent = try await offline.sendTransfer(to: bob.id, amountMinor: 5_000, currency: "BDT")
        offline.close()

        let sdk = try await SendOnce.open(config(alice, db: db))
        defer { sdk.close() }
        let summary = await background.appDidEnterBackground(sdk, deadline: 10)
        XCTAssertEqual(summary?.finished.map(\.localId), [sent.localId])
        XCTAssertEqual(platform.begun, [7])
        XCTAssertEqual(platform.endedTokens, [7], "ended once, with its token")
        XCTAssertEqual(platform.refreshCount, 0, "nothing left: no refresh")
        let debits = try await server.debits(sent.idempotencyKey)
        XCTAssertEqual(debits.count, 1)
        // Nothing unfinished: no extra time asked for.
        let nothing = await background.appDidEnterBackground(sdk)
        XCTAssertNil(nothing)
        XCTAssertEqual(platform.begun.count, 1)
    }

    func testWhenIOSTakesTheTimeBackTheGrantEndsOnceAndARefreshIsAsked() async throws {
        let (alice, bob, db, platform, background) = try await rig(expireAtOnce: true)
        let sdk = try await SendOnce.open(config(alice, db: db, profile: .offline))
        defer { sdk.close() }
        let sent = try await sdk.sendTransfer(to: bob.id, amountMinor: 5_000, currency: "BDT")
        _ = await background.appDidEnterBackground(sdk, deadline: 10)
        XCTAssertEqual(platform.endedTokens, [7], "ended exactly once although iOS expired it first")
        XCTAssertEqual(platform.refreshCount, 1, "what is left runs in a refresh")
        let still = try await sdk.transfer(sent.localId)
        XCTAssertNotEqual(still.state, .succeeded)
    }

    func testTheRefreshHandlerDrainsAndAsksForTheNextRunOnlyWhileSomethingIsDue() async throws {
        let (alice, bob, db, platform, background) = try await rig()
        let offline = try await SendOnce.open(config(alice, db: db, profile: .offline))
        let sent = try await offline.sendTransfer(to: bob.id, amountMinor: 5_000, currency: "BDT")
        let stillDue = await background.handleRefresh(offline, deadline: 0.3)
        XCTAssertTrue(stillDue)
        XCTAssertEqual(platform.refreshCount, 1, "offline: the next refresh is asked for")
        offline.close()
        let sdk = try await SendOnce.open(config(alice, db: db))
        defer { sdk.close() }
        let done = await background.handleRefresh(sdk, deadline: 10)
        XCTAssertTrue(done)
        XCTAssertEqual(platform.refreshCount, 1, "all done: nothing more asked")
        let t = try await sdk.transfer(sent.localId)
        XCTAssertEqual(t.state, .succeeded)
    }
}
