import SendOnceTestSupport
import Foundation
import SendOnce
import XCTest
@testable import DemoViewModel

/// The demo's view model against the real Rust library (through the Swift bindings) and the real
/// server-mock on loopback: what the screen shows after taps, train mode, a kill-and-reopen, and errors.
/// The same scenarios as the Android demo's DemoViewModelTest.
final class DemoViewModelTests: ServerTestCase {
    var cleanups: [@MainActor () -> Void] = []

    override func tearDown() async throws {
        let pending = cleanups
        cleanups = []
        await MainActor.run { pending.reversed().forEach { $0() } }
        try await super.tearDown()
    }

    let fastRetry = RetryPolicy(base: 0.02, cap: 0.3, giveUpAfter: 86_400, jitter: true, budgetBurst: 1000, budgetPerSecond: 1000)

    func options(
        serverUrl: String? = nil, retry: RetryPolicy?? = .none, clockSpeed: Double = 1, balance: Int64 = 1_000_000
    ) -> DemoOptions {
        DemoOptions(
            defaultServerUrl: serverUrl ?? server.baseUrl, startingBalanceMinor: balance,
            retry: retry ?? fastRetry, requestTimeout: 5, clockSpeed: clockSpeed, trainSeed: 7, tickMs: 100
        )
    }

    func tempDir() throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("sendonce-demo-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        cleanups.append { try? FileManager.default.removeItem(at: dir) }
        return dir
    }

    /// A view model as the app makes it, closed after the test.
    @MainActor
    func viewModel(_ dir: URL? = nil, _ options: DemoOptions? = nil, memory: ScreenMemory? = nil) throws -> DemoViewModel {
        Texts.locale = Locale(identifier: "en_US")
        let directory = try dir ?? tempDir()
        let vm = DemoViewModel(
            directory: directory, options: options ?? self.options(), memory: memory ?? InMemoryScreenMemory(),
            databaseDirectory: directory.appendingPathComponent("Application Support/sendonce")
        )
        cleanups.append { vm.shutdown() }
        return vm
    }

    /// Polls the screen until `p` holds (the main actor runs the view model's tasks meanwhile).
    @MainActor
    @discardableResult
    func wait(
        _ vm: DemoViewModel, _ what: String, timeout: TimeInterval = 30, file: StaticString = #filePath, line: UInt = #line,
        _ p: (DemoUiState) -> Bool
    ) async throws -> DemoUiState {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if p(vm.state) { return vm.state }
            try await Task.sleep(nanoseconds: 10_000_000)
        }
        XCTFail("timed out waiting for \(what); last state: \(vm.state)", file: file, line: line)
        throw TestError("timed out waiting for \(what)")
    }

    /// Waits until the app is ready, types the form and goes to the confirm step.
    @MainActor
    @discardableResult
    func review(_ vm: DemoViewModel, _ amount: String, recipient: String? = nil) async throws -> DemoUiState {
        let ready = try await wait(vm, "ready") { !$0.loading && $0.setupError == nil && $0.balanceMinor != nil }
        vm.onRecipientChanged(recipient ?? ready.recipient)
        vm.onAmountChanged(amount)
        vm.onReviewTapped()
        return try await wait(vm, "confirm step") { $0.screen == .confirm }
    }

    func debits(of userId: String) async throws -> [LedgerEntry] {
        try await server.ledger().filter { $0.kind == "debit" && $0.userId == userId }
    }

    @MainActor
    func testTheScreenGoesAwayOfflineAndABackgroundDrainOnTheSharedInstanceSettlesIt() async throws {
        let dir = try tempDir()
        let vm = try viewModel(dir)
        vm.onNetworkChanged(false)
        _ = try await review(vm, "17")
        vm.onSendTapped()
        let waiting = try await wait(vm, "waiting") { $0.transfers.count == 1 }
        let key = try XCTUnwrap(waiting.transfers.first).idempotencyKey
        vm.close() // the scene goes to the background; the process and its shared SDK stay
        let before = try await server.debits(key)
        XCTAssertTrue(before.isEmpty)

        // The background refresh runs with the network back: it drains the same instance.
        let summary = try await XCTUnwrapAsync(try await DemoBackground.drain(
            directory: dir, databaseDirectory: dir.appendingPathComponent("Application Support/sendonce"),
            deadline: .seconds(20), options: options()
        ))
        XCTAssertEqual(summary.finished.map(\.idempotencyKey), [key])
        XCTAssertEqual(summary.finished.first?.state, .succeeded)
        XCTAssertTrue(summary.unfinished.isEmpty)
        let after = try await server.debits(key)
        XCTAssertEqual(after.count, 1)
        vm.shutdown()
    }

    private func XCTUnwrapAsync<T>(_ value: T?) async throws -> T { try XCTUnwrap(value) }

    @MainActor
    func testTenQuickTapsOnSendMakeOneTransferAndOneDebit() async throws {
        let vm = try viewModel()
        let confirm = try await review(vm, "12.50")
        XCTAssertEqual(confirm.confirmText, "Send 12.50 BDT to \(confirm.recipient)?")
        XCTAssertTrue(confirm.sendEnabled, "Send is enabled on the confirm step")
        let me = try XCTUnwrap(confirm.accountUserId)

        // Record every screen from the first tap on: Send must stay disabled until the receipt.
        var seen: [DemoUiState] = []
        let recorder = Task { for await s in vm.states() { seen.append(s) } }
        for _ in 0 ..< 10 { vm.onSendTapped() }
        let done = try await wait(vm, "receipt") {
            $0.screen == .receipt && $0.balanceMinor == 1_000_000 - 1250 && $0.transfers.first?.stateLabel == "Sent"
        }
        recorder.cancel()

        let receipt = try XCTUnwrap(done.receipt)
        XCTAssertEqual(receipt.title, "Sent 12.50 BDT to \(confirm.recipient)")
        XCTAssertFalse(done.sendEnabled, "after the receipt Send stays off until Send another")
        XCTAssertFalse(done.showSpinner)
        XCTAssertNil(done.errorText)
        XCTAssertEqual(done.balanceText, "Balance: 9,987.50 BDT")
        XCTAssertTrue(seen.filter { $0.screen == .progress }.allSatisfy { !$0.sendEnabled }, "Send enabled while sending")

        // Late taps on the receipt change nothing either.
        for _ in 0 ..< 5 { vm.onSendTapped() }
        try await Task.sleep(nanoseconds: 300_000_000)
        XCTAssertEqual(vm.state.transfers.count, 1, "one transfer in the list: \(vm.state.transfers)")
        let ledger = try await debits(of: me)
        XCTAssertEqual(ledger.count, 1, "one debit in the ledger: \(ledger)")
        XCTAssertEqual(ledger.first?.transferId, receipt.serverTransferId)
        XCTAssertEqual(ledger.first?.idempotencyKey, receipt.idempotencyKey)

        // Send another: a new intent, a new key.
        vm.onSendAnotherTapped()
        let form = try await wait(vm, "form again") { $0.screen == .form }
        XCTAssertEqual(form.amount, "")
        try await review(vm, "1")
        vm.onSendTapped()
        vm.onSendTapped()
        let second = try await wait(vm, "second receipt") { $0.screen == .receipt && $0.transfers.filter(\.settled).count == 2 }
        XCTAssertNotEqual(second.receipt?.idempotencyKey, receipt.idempotencyKey)
        let both = try await debits(of: me)
        XCTAssertEqual(both.count, 2)
    }

    @MainActor
    func testTenQuickTapsBehindAReplayingLoadBalancerStillDebitOnce() async throws {
        let vm = try viewModel()
        vm.onTrainModeSelected(.lbReplay)
        let confirm = try await review(vm, "3")
        for _ in 0 ..< 10 { vm.onSendTapped() }
        let done = try await wait(vm, "receipt") { $0.screen == .receipt }
        XCTAssertEqual(done.trainMode, .lbReplay)
        XCTAssertEqual(done.transfers.count, 1)
        let ledger = try await debits(of: try XCTUnwrap(confirm.accountUserId))
        XCTAssertEqual(ledger.count, 1)
    }

    @MainActor
    func testTrainModeSettlesEveryTransferOnce() async throws {
        // The real Train profile (tunnels, lost answers, seconds of latency, replays) with the SDK's default
        // schedule, on a clock running 50x so its minutes of tunnels pass in seconds.
        let vm = try viewModel(nil, options(retry: .some(nil), clockSpeed: 50))
        vm.onTrainModeSelected(.train)
        let reviewed = try await review(vm, "5")
        let me = try XCTUnwrap(reviewed.accountUserId)
        var keys: [String] = []
        for i in 1 ... 3 {
            if i > 1 {
                vm.onSendAnotherTapped()
                try await review(vm, "\(i)")
            }
            for _ in 0 ..< 3 { vm.onSendTapped() }
            let done = try await wait(vm, "receipt \(i)", timeout: 60) { $0.screen == .receipt && $0.transfers.count == i }
            let receipt = try XCTUnwrap(done.receipt)
            keys.append(receipt.idempotencyKey)
            let ledger = try await server.debits(receipt.idempotencyKey)
            XCTAssertEqual(ledger.count, 1, "one debit for transfer \(i)")
            XCTAssertEqual(ledger.first?.transferId, receipt.serverTransferId)
        }
        XCTAssertEqual(Set(keys).count, 3)
        let all = try await debits(of: me)
        XCTAssertEqual(all.count, 3)
        let last = try await wait(vm, "balance") {
            $0.balanceMinor == 1_000_000 - 500 - 200 - 300 && $0.transfers.allSatisfy(\.settled)
        }
        XCTAssertTrue(last.transfers.allSatisfy { $0.stateLabel == "Sent" }, "\(last.transfers)")
        XCTAssertEqual(last.trainMode, .train)
    }

    @MainActor
    func testOfflineShowsTheWaitingLineAndTheNetworkComingBackSettlesIt() async throws {
        let slow = RetryPolicy(base: 1, cap: 4, giveUpAfter: 86_400, jitter: true, budgetBurst: 1000, budgetPerSecond: 1000)
        let vm = try viewModel(nil, options(retry: .some(slow)))
        vm.onTrainModeSelected(.offline)
        let reviewed = try await review(vm, "7")
        let me = try XCTUnwrap(reviewed.accountUserId)
        vm.onSendTapped()
        let waiting = try await wait(vm, "waiting line") { $0.statusLine?.contains("next try in") == true }
        let line = try XCTUnwrap(waiting.statusLine)
        let parts = line.split(separator: " ")
        // "Waiting for network — attempt N, next try in Xs"
        XCTAssertTrue(line.hasPrefix("Waiting for network — attempt "), line)
        XCTAssertEqual(parts.count, 10, line)
        let attempt = Int(parts[5].dropLast()) ?? -1
        let seconds = Int(parts[9].dropLast()) ?? -1
        XCTAssertGreaterThanOrEqual(attempt, 1, line)
        XCTAssertTrue((0 ... 4).contains(seconds), line)
        XCTAssertTrue(parts[9].hasSuffix("s"), line)
        XCTAssertTrue(waiting.showSpinner)
        XCTAssertFalse(waiting.sendEnabled)
        XCTAssertEqual(waiting.screen, .progress)
        XCTAssertEqual(waiting.transferTitle, "7.00 BDT to \(waiting.recipient)")
        try await wait(vm, "list label") { $0.transfers.first?.stateLabel.hasPrefix("Waiting for network (attempt") == true }
        let none = try await debits(of: me)
        XCTAssertTrue(none.isEmpty)

        vm.onTrainModeSelected(.off)
        vm.onNetworkChanged(true)
        let done = try await wait(vm, "receipt") { $0.screen == .receipt }
        let ledger = try await server.debits(try XCTUnwrap(done.receipt).idempotencyKey)
        XCTAssertEqual(ledger.count, 1)
    }

    @MainActor
    func testClosingWhileATransferWaitsOfflineAndReopeningResumesItWithTheSameKey() async throws {
        let dir = try tempDir()
        let first = try viewModel(dir)
        first.onTrainModeSelected(.offline)
        let reviewed = try await review(first, "42")
        let me = try XCTUnwrap(reviewed.accountUserId)
        first.onSendTapped()
        let waiting = try await wait(first, "waiting") {
            $0.statusLine?.hasPrefix("Waiting for network — attempt") == true && $0.transfers.count == 1
        }
        let key = try XCTUnwrap(waiting.transfers.first).idempotencyKey
        first.shutdown() // the app is killed while the transfer waits
        try await Task.sleep(nanoseconds: 300_000_000)
        let before = try await server.debits(key)
        XCTAssertTrue(before.isEmpty, "nothing reached the server while offline")

        // The app starts again on the same files: same account, same database.
        let second = try viewModel(dir)
        let resumed = try await wait(second, "resumed") { !$0.loading && $0.notice == DemoViewModel.resumedNotice }
        XCTAssertEqual(resumed.accountUserId, me)
        XCTAssertEqual(resumed.trainMode, .off)
        let done = try await wait(second, "receipt") { $0.screen == .receipt && $0.transfers.first?.settled == true }
        XCTAssertEqual(done.receipt?.idempotencyKey, key, "the same key, never a new one")
        XCTAssertEqual(done.transferTitle, "42.00 BDT to \(waiting.recipient)")
        XCTAssertEqual(done.transfers.count, 1)
        let ledger = try await server.debits(key)
        XCTAssertEqual(ledger.count, 1)
        let mine = try await debits(of: me)
        XCTAssertEqual(mine.count, 1)
        try await wait(second, "balance") { $0.balanceMinor == 1_000_000 - 4200 }
    }

    /// Before: the comma was stripped, so "12,50" typed in German confirmed and debited 1,250.00 BDT.
    @MainActor
    func testAGermanUsers12Comma50Debits12Point50Not1250() async throws {
        let vm = try viewModel()
        Texts.locale = Locale(identifier: "de_DE")
        defer { Texts.locale = Locale(identifier: "en_US") }
        let confirm = try await review(vm, "12,50")
        XCTAssertEqual(confirm.confirmText, "12,50 BDT an \(confirm.recipient) senden?")
        XCTAssertNil(confirm.sendHint, "Send is on: nothing to explain")
        vm.onSendTapped()
        let receipt = try await wait(vm, "receipt") { $0.screen == .receipt }
        // Send is off on the receipt: VoiceOver says why, in the user's language.
        XCTAssertEqual(receipt.sendHint, "Senden ist aus: diese Überweisung ist erledigt. Für eine neue: Weitere senden.")
        let debits = try await debits(of: try XCTUnwrap(confirm.accountUserId))
        XCTAssertEqual(debits.map(\.amountMinor), [1250])
        // The list row carries what a screen reader announces, in the user's language.
        try await wait(vm, "announcement") { $0.transfers.first?.announcement == "Gesendet: 12,50 BDT an \(confirm.recipient)" }
    }

    @MainActor
    func testFormValidationAndATooLargeAmountShowTheirTexts() async throws {
        let vm = try viewModel()
        try await wait(vm, "ready") { !$0.loading && $0.balanceMinor != nil }
        vm.onRecipientChanged("")
        vm.onReviewTapped()
        let empty = try await wait(vm, "validation") { $0.validationText != nil }
        XCTAssertEqual(empty.validationText, "Enter the recipient's user id")
        vm.onRecipientChanged("usr_x")
        vm.onAmountChanged("12.345")
        let bad = try await wait(vm, "decimals") { $0.validationText == "At most 2 decimal places for BDT" }
        XCTAssertFalse(bad.reviewEnabled)
        vm.onReviewTapped()
        XCTAssertEqual(vm.state.screen, .form)

        // Format is fine, the SDK's limit is not: the typed InvalidAmount error, nothing persisted.
        let confirm = try await review(vm, "10000000001", recipient: "usr_x")
        XCTAssertTrue(confirm.sendEnabled)
        vm.onSendTapped()
        let refused = try await wait(vm, "invalid amount") { $0.errorText != nil }
        XCTAssertEqual(refused.errorText, "Invalid amount: enter more than 0 and at most 10,000,000,000.00 BDT.")
        XCTAssertEqual(refused.screen, .confirm)
        XCTAssertTrue(refused.sendEnabled, "a refused confirm leaves Send enabled")
        XCTAssertTrue(refused.transfers.isEmpty)
        vm.onEditTapped()
        let form = try await wait(vm, "form") { $0.screen == .form }
        XCTAssertNil(form.errorText)
        XCTAssertEqual(form.amount, "10000000001")
    }

    @MainActor
    func testUnknownRecipientIsA404RejectionWithItsText() async throws {
        let vm = try viewModel()
        let reviewed = try await review(vm, "5", recipient: "usr_nobody")
        let me = try XCTUnwrap(reviewed.accountUserId)
        vm.onSendTapped()
        let rejected = try await wait(vm, "rejected") { $0.screen == .rejected }
        XCTAssertEqual(rejected.errorText, "Unknown recipient: no account has the id usr_nobody. Nothing was sent.")
        XCTAssertTrue(rejected.sendEnabled, "after a definitive no the user may send a corrected request")
        XCTAssertFalse(rejected.showSpinner)
        try await wait(vm, "list label") { $0.transfers.first?.stateLabel == "Declined — unknown recipient" }
        let none = try await debits(of: me)
        XCTAssertTrue(none.isEmpty)
        vm.onEditTapped()
        let form = try await wait(vm, "form") { $0.screen == .form }
        XCTAssertEqual(form.recipient, "usr_nobody")
        XCTAssertNil(form.errorText)
    }

    @MainActor
    func testInsufficientFundsIsA402RejectionWithItsText() async throws {
        let vm = try viewModel(nil, options(balance: 1000))
        let ready = try await review(vm, "50")
        XCTAssertEqual(ready.balanceText, "Balance: 10.00 BDT")
        vm.onSendTapped()
        let rejected = try await wait(vm, "rejected") { $0.screen == .rejected }
        XCTAssertEqual(rejected.errorText, "Not enough money: your balance is lower than 50.00 BDT. Nothing was sent.")
        try await wait(vm, "list label") { $0.transfers.first?.stateLabel == "Declined — not enough money" }
        let none = try await debits(of: try XCTUnwrap(ready.accountUserId))
        XCTAssertTrue(none.isEmpty)
        XCTAssertEqual(vm.state.balanceText, "Balance: 10.00 BDT")
    }

    @MainActor
    func testKeyReusedIsAFailureWithItsTextAndIsNeverRetried() async throws {
        let scripted = try ScriptedServer(status: 422, code: "idempotency_key_reused")
        defer { scripted.stop() }
        let vm = try viewModel(nil, options(serverUrl: scripted.baseUrl))
        try await review(vm, "5", recipient: "usr_bob")
        vm.onSendTapped()
        let failed = try await wait(vm, "failed") { $0.screen == .rejected }
        XCTAssertEqual(
            failed.errorText,
            "Refused: this transfer's key was already used for a different request (key reused). "
                + "No money moved twice. This is a bug in the app — please report it."
        )
        try await wait(vm, "list label") { $0.transfers.first?.stateLabel == "Failed — key reused" }
        try await Task.sleep(nanoseconds: 500_000_000)
        XCTAssertEqual(scripted.transferRequests, 1, "a 422 key reuse is never retried")
    }

    @MainActor
    func testGivingUpWhileOfflineNeedsAttentionAndCheckAgainResolvesItByKey() async throws {
        let retry = RetryPolicy(base: 0.02, cap: 0.2, giveUpAfter: 0.4, jitter: true, budgetBurst: 1000, budgetPerSecond: 1000)
        let vm = try viewModel(nil, options(retry: .some(retry)))
        vm.onTrainModeSelected(.offline)
        try await review(vm, "9")
        vm.onSendTapped()
        let stuck = try await wait(vm, "needs attention") { $0.screen == .needsAttention }
        XCTAssertEqual(stuck.errorText, Texts.needsAttention)
        XCTAssertFalse(stuck.showSpinner)
        try await wait(vm, "list label") { $0.transfers.first?.stateLabel == "Needs attention" }

        // Back online: the status look-up by key finds that the server never got it. No new key, no send.
        vm.onTrainModeSelected(.off)
        vm.onCheckAgainTapped()
        let resolved = try await wait(vm, "resolved") { $0.screen == .rejected }
        XCTAssertEqual(resolved.errorText, "The server never received this transfer. No money moved.")
        let row = try await wait(vm, "list label") { $0.transfers.first?.stateLabel == "Failed — never reached the server" }
        XCTAssertEqual(row.transfers.count, 1)
        let none = try await server.debits(try XCTUnwrap(row.transfers.first).idempotencyKey)
        XCTAssertTrue(none.isEmpty)
    }

    @MainActor
    func testAnUnreachableServerAndABadUrlShowTheirTextsAndAGoodUrlConnects() async throws {
        let vm = try viewModel(nil, options(serverUrl: "http://127.0.0.1:1"))
        let down = try await wait(vm, "setup error") { $0.setupError != nil }
        XCTAssertTrue(down.setupError?.hasPrefix("Cannot reach the server at http://127.0.0.1:1.") == true, "\(down.setupError ?? "")")
        XCTAssertFalse(down.reviewEnabled)

        vm.onServerUrlChanged("not a url")
        vm.onServerUrlSaved()
        let bad = try await wait(vm, "settings error") { $0.settingsError != nil }
        XCTAssertEqual(bad.settingsError, "Enter a URL like http://localhost:8080")

        vm.onServerUrlChanged(server.baseUrl + "/")
        vm.onServerUrlSaved()
        let up = try await wait(vm, "connected") { !$0.loading && $0.setupError == nil && $0.balanceMinor != nil }
        XCTAssertEqual(up.serverUrl, server.baseUrl)
        XCTAssertEqual(up.balanceText, "Balance: 10,000.00 BDT")
        XCTAssertFalse(up.recipient.isEmpty, "the demo recipient is filled in")
    }

    @MainActor
    func testAFinishedReceiptSurvivesProcessDeathThroughTheSceneStorage() async throws {
        let dir = try tempDir()
        let memory = InMemoryScreenMemory() // @SceneStorage: survives the process, nothing else does
        let first = try viewModel(dir, memory: memory)
        try await review(first, "6")
        first.onSendTapped()
        let done = try await wait(first, "receipt") { $0.screen == .receipt }
        let receipt = try XCTUnwrap(done.receipt)
        XCTAssertNotNil(memory.transferId, "the screen saved its transfer's local id")
        first.shutdown() // the system discards the scene while the receipt is on screen

        // The scene comes back with its storage: the SDK re-attaches the screen to the same receipt.
        let second = try viewModel(dir, memory: memory)
        let restored = try await wait(second, "restored receipt") { !$0.loading && $0.screen == .receipt }
        XCTAssertEqual(restored.receipt?.idempotencyKey, receipt.idempotencyKey)
        XCTAssertEqual(restored.receipt?.serverTransferId, receipt.serverTransferId)
        XCTAssertFalse(restored.sendEnabled, "a restored receipt does not enable Send")
        let files = try FileManager.default.contentsOfDirectory(atPath: dir.appendingPathComponent("Application Support/sendonce").path)
        XCTAssertTrue(files.contains { $0.hasSuffix(".db") }, "the database is in the prepared directory: \(files)")
        second.shutdown()

        // Without the saved id (a fresh start), the finished transfer is not brought back: the form shows.
        let fresh = try viewModel(dir)
        let start = try await wait(fresh, "fresh start") { !$0.loading }
        XCTAssertEqual(start.screen, .form)
        fresh.shutdown()

        // "Send another" clears the saved id.
        let third = try viewModel(dir, memory: memory)
        try await wait(third, "restored again") { !$0.loading && $0.screen == .receipt }
        third.onSendAnotherTapped()
        try await wait(third, "form") { $0.screen == .form }
        XCTAssertNil(memory.transferId)
    }
}
