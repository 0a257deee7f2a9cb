import Foundation
import XCTest
@testable import SendOnce
@testable import SendOnceTesting

/// An app's screen tested with the fake (product SendOnceTesting), as an app team would, and the fake's
/// decisions checked against the core's own so that it cannot drift.
final class FakeSendOnceTests: XCTestCase {
    /// What an app writes: a pay screen over the SDK's protocols, not over the native classes.
    final class PayScreen<SDK: SendOnceClient>: @unchecked Sendable {
        let sdk: SDK
        var composer: SDK.Composing!
        init(_ sdk: SDK) { self.sdk = sdk }
        func open(saved: String?) async throws { composer = try await sdk.restoreComposer(savedLocalId: saved) }
        func tapSend() async throws -> Transfer { try await composer.confirm(to: "bob", amountMinor: 5_000, currency: "BDT") }
        var sendButtonEnabled: Bool { composer.sendEnabled }
    }

    func testRepeatedTapsAreOneTransferWithOneKeyAndSendStaysOffUntilTheAnswer() async throws {
        let sdk = FakeSendOnce()
        let screen = PayScreen(sdk)
        try await screen.open(saved: nil)
        XCTAssertTrue(screen.sendButtonEnabled)
        let first = try await screen.tapSend()
        XCTAssertFalse(screen.sendButtonEnabled)
        let again = try await screen.tapSend()
        XCTAssertEqual(again.localId, first.localId)
        XCTAssertEqual(again.idempotencyKey, first.idempotencyKey)
        XCTAssertEqual(sdk.confirmed.count, 1)

        try sdk.retrying(first.localId, attempts: 2)
        let retrying = try await sdk.transfer(first.localId)
        XCTAssertEqual(screen.composer.state, .waiting(transfer: retrying, needsAuth: false))
        try sdk.succeed(first.localId, serverTransferId: "tr_1")
        guard case let .done(receipt) = screen.composer.state else { return XCTFail("\(screen.composer.state)") }
        XCTAssertEqual(receipt.serverTransferId, "tr_1")
        XCTAssertEqual(receipt.idempotencyKey, first.idempotencyKey)
        XCTAssertFalse(screen.sendButtonEnabled, "after Done, Send stays off until a new intent")
        let outcome = try await sdk.outcome(of: first.localId)
        XCTAssertEqual(outcome.state, .succeeded)

        try await screen.composer.newIntent()
        XCTAssertTrue(screen.sendButtonEnabled)
        let next = try await screen.tapSend()
        XCTAssertNotEqual(next.idempotencyKey, first.idempotencyKey)
    }

    func testADefinitiveNoEnablesSendAgainAndAStepUpParksUnderTheSameKey() async throws {
        let sdk = FakeSendOnce()
        let composer = try await sdk.composer()
        let t = try await composer.confirm(to: "bob", amountMinor: 5_000, currency: "BDT")
        try sdk.reject(t.localId, .insufficientFunds, code: "insufficient_funds")
        XCTAssertTrue(composer.sendEnabled)
        let next = try await composer.confirm(to: "bob", amountMinor: 500, currency: "BDT")
        XCTAssertNotEqual(next.idempotencyKey, t.idempotencyKey)

        try sdk.requireAction(next.localId, RequiredAction(code: "SCA_REQUIRED", url: "https://bank.example/sca", challengeId: "ch_1"))
        XCTAssertEqual(composer.state.requiredAction?.challengeId, "ch_1")
        let tapped = try await composer.confirm(to: "bob", amountMinor: 500, currency: "BDT")
        XCTAssertEqual(tapped.localId, next.localId)
        let resumed = try await sdk.actionCompleted(next.localId)
        XCTAssertEqual(resumed.state, .pending)
        XCTAssertEqual(resumed.idempotencyKey, next.idempotencyKey)
        do {
            try await composer.newIntent()
            XCTFail("a new intent while the transfer is unfinished")
        } catch SendOnceError.TransferUnfinished {}
    }

    func testOnSendAnswersEachTransferAndCloseEndsTheStreams() async throws {
        let sdk = FakeSendOnce()
        sdk.onSend = { fake, t in _ = try? fake.succeed(t.localId) }
        let t = try await sdk.sendTransfer(to: "bob", amountMinor: 5_000, currency: "BDT")
        let done = try await sdk.outcome(of: t.localId)
        XCTAssertEqual(done.state, .succeeded)
        let stream = sdk.transfers
        sdk.close()
        var lists = 0
        for await _ in stream { lists += 1 }
        XCTAssertLessThanOrEqual(lists, 1)
        do {
            _ = try await sdk.sendTransfer(to: "bob", amountMinor: 5_000, currency: "BDT")
            XCTFail("a closed fake refuses")
        } catch SendOnceError.Closed {}
    }

    /// The fake decides in Swift what the SDK decides in Rust: the two agree for every state.
    func testTheFakesComposerMappingSendRuleAndFinalStatesAreTheCores() {
        let rejections: [Rejection?] = [nil, Rejection(reason: .insufficientFunds, code: "insufficient_funds", detail: "no", httpStatus: 402)]
        let actions: [RequiredAction?] = [nil, RequiredAction(code: "SCA_REQUIRED", url: "https://bank.example/sca", challengeId: "ch_1")]
        let states: [TransferState] = [.pending, .sending, .retrying, .authRequired, .succeeded, .rejected, .failed, .needsAttention, .requiresAction]
        var checked = 0
        for state in states { for attempts: UInt32 in [0, 1, 2] { for r in rejections { for a in actions {
            let t = Transfer(
                localId: "l1", idempotencyKey: "k1", toUserId: "bob", amountMinor: 5_000, currency: "BDT", note: nil,
                state: state, attempts: attempts, createdAt: Date(timeIntervalSince1970: 1), updatedAt: Date(timeIntervalSince1970: 2),
                lastAttemptAt: nil, nextAttemptAt: nil, lastError: nil, serverTransferId: nil, rejection: r, replayed: false,
                operationType: "transfer", requiredAction: a)
            let core = composerStateOf(transfer: t)
            XCTAssertEqual(composerState(of: t), core, "\(state), \(attempts) attempts")
            XCTAssertEqual(core.fakeSendEnabled, composerStateSendEnabled(state: core), "\(state)")
            XCTAssertEqual(state.fakeFinal, transferStateIsFinal(state: state), "\(state)")
            XCTAssertEqual(state.fakeSettled, transferStateIsSettled(state: state), "\(state)")
            checked += 1
        } } } }
        XCTAssertEqual(checked, states.count * 12)
    }
}
