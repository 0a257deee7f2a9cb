import Foundation
import SendOnce

/// The whole demo screen: wallet balance, recipient and amount form, confirm step, progress, receipt,
/// recent transfers, Train mode and the server URL setting. No UIKit or SwiftUI: the SwiftUI shell renders
/// `state` (or iterates `states()`) and calls the `on…` methods, nothing else.
///
/// Every transfer decision (key, state, retry, whether Send is enabled) is the SDK's; this class only turns
/// SDK state into text and forwards taps. `directory` holds the demo account, `databaseDirectory` the SDK's
/// database (prepared by `DatabaseLocation`), `memory` what survives process death (`@SceneStorage`). No
/// disk or network work runs on the MainActor: the SDK's calls are async, the account store is an actor.
/// Call `close()` when the screen goes away: the SDK is the process's shared instance and keeps sending in
/// the background, where a BGProcessingTask (`DemoBackground.drain`) finishes what is left.
@MainActor
public final class DemoViewModel {
    /// What the user typed and chose; everything else on screen comes from the SDK.
    private struct Model {
        var loading = true
        var setupError: String?
        var serverUrl: String
        var serverUrlField: String
        var settingsError: String?
        var step: Screen = .form
        var recipient = ""
        var amount = ""
        var showValidation = false
        var pending: TransferRequest?
        var errorText: String?
        var notice: String?
        var wallet: Wallet?
        var balanceError: String?
        var trainMode: TrainMode = .off
        var networkAvailable = true
    }

    public static let resumedNotice =
        "Resumed a transfer confirmed before the app was closed: same key, it is never sent twice."
    public static let replayedNote =
        "The first answer was lost on the way; the server replayed it. The money moved once."

    /// The screen now.
    public private(set) var state: DemoUiState {
        didSet {
            guard state != oldValue else { return }
            for continuation in continuations.values { continuation.yield(state) }
        }
    }

    private let directory: URL
    private let databaseDirectory: URL
    private let memory: ScreenMemory
    private let options: DemoOptions
    private let store: AccountStore
    private let walletClient = WalletClient()
    private var model: Model { didSet { render() } }
    private var session: Session?
    private var composerState: ComposerState = .editing
    private var transfers: [Transfer] = []
    private var finalCount = -1
    private var ticker: Task<Void, Never>?
    private var connectGeneration = 0
    private var closed = false
    private var lastTap: Task<Void, Never>?
    private var pendingTaps = 0
    private var continuations: [UUID: AsyncStream<DemoUiState>.Continuation] = [:]

    public init(
        directory: URL, options: DemoOptions = DemoOptions(), memory: ScreenMemory? = nil,
        databaseDirectory: URL? = nil
    ) {
        self.directory = directory
        self.databaseDirectory = databaseDirectory ?? directory
        self.memory = memory ?? InMemoryScreenMemory()
        self.options = options
        store = AccountStore(file: directory.appendingPathComponent(DemoBackground.accountFile))
        model = Model(serverUrl: options.defaultServerUrl, serverUrlField: options.defaultServerUrl)
        state = DemoUiState()
        render()
        Task {
            if let saved = await store.serverUrl {
                model.serverUrl = saved
                model.serverUrlField = saved
            }
            await connect()
        }
    }

    /// The screen's states: the current one at once, then every change. Ends on `close()`.
    public func states() -> AsyncStream<DemoUiState> {
        let id = UUID()
        return AsyncStream(bufferingPolicy: .bufferingNewest(1)) { continuation in
            if closed {
                continuation.yield(state)
                continuation.finish()
                return
            }
            continuations[id] = continuation
            continuation.yield(state)
            continuation.onTermination = { [weak self] _ in
                Task { @MainActor in self?.continuations[id] = nil }
            }
        }
    }

    // MARK: - taps and platform events

    public func onRecipientChanged(_ text: String) {
        inOrderNow {
            self.model.recipient = text
            self.model.errorText = nil
        }
    }

    public func onAmountChanged(_ text: String) {
        inOrderNow {
            self.model.amount = text
            self.model.errorText = nil
        }
    }

    /// Review: checks the form and shows the confirm step.
    public func onReviewTapped() {
        inOrderNow { self.review() }
    }

    private func review() {
        guard Texts.validation(recipient: model.recipient, amount: model.amount) == nil,
              case let .valid(minor) = Texts.parseAmount(model.amount)
        else {
            model.showValidation = true
            return
        }
        var m = model
        m.pending = TransferRequest(
            toUserId: m.recipient.trimmingCharacters(in: .whitespaces), amountMinor: minor, currency: currency(m), note: nil
        )
        m.step = .confirm
        m.errorText = nil
        m.notice = nil
        model = m
    }

    /// Send. Every tap goes to the composer, which returns the same transfer for every tap of one intent:
    /// ten quick taps are one transfer with one key. The button's enabled state is the composer's.
    public func onSendTapped() {
        inOrderNow { self.send() }
    }

    private func send() {
        guard let s = session, let request = model.pending else { return }
        var m = model
        m.errorText = nil
        m.notice = nil
        model = m
        Task {
            do {
                // Kept for process death: the restored screen re-attaches to this transfer, receipt included.
                memory.transferId = try await s.composer.confirm(request).localId
            } catch {
                if !closed { model.errorText = Texts.errorText(error, currency: request.currency) }
            }
        }
    }

    /// Back from the confirm step (or from a rejection) to the form, keeping what was typed.
    public func onEditTapped() {
        inOrder {
            _ = await self.startNewIntent()
            var m = self.model
            m.step = .form
            m.pending = nil
            m.errorText = nil
            m.notice = nil
            self.model = m
        }
    }

    /// "Send another" after the receipt (or after handing a transfer over as Needs attention).
    public func onSendAnotherTapped() {
        inOrder {
            guard await self.startNewIntent() else { return }
            var m = self.model
            m.step = .form
            m.pending = nil
            m.amount = ""
            m.showValidation = false
            m.errorText = nil
            m.notice = nil
            self.model = m
        }
    }

    /// Needs attention: asks the server about the transfer's key now (never sends it with a new key).
    public func onCheckAgainTapped() {
        guard let s = session, let t = composerState.currentTransfer else { return }
        model.errorText = nil
        Task {
            do {
                _ = try await s.sdk.resolve(t.localId)
            } catch {
                if !closed { model.errorText = Texts.errorText(error, currency: t.currency) }
            }
        }
    }

    /// Train mode: switches the SDK's network simulator at once (transfers in flight included).
    public func onTrainModeSelected(_ mode: TrainMode) {
        model.trainMode = mode
        guard let s = session else { return }
        let seed = options.trainSeed ?? UInt64.random(in: 0 ... .max)
        Task {
            do {
                try await s.sdk.setNetworkProfile(mode.profile, seed: seed)
            } catch {
                model.errorText = Texts.errorText(error, currency: currency(model))
            }
        }
    }

    /// The platform's connectivity callback (iOS `NWPathMonitor`, Android `NetworkCallback`).
    public func onNetworkChanged(_ available: Bool) {
        model.networkAvailable = available
        let s = session
        Task {
            try? await s?.sdk.setNetworkAvailable(available)
            if available { await refreshBalance() }
        }
    }

    public func onRefreshBalanceTapped() {
        Task { await refreshBalance() }
    }

    public func onServerUrlChanged(_ text: String) {
        model.serverUrlField = text
        model.settingsError = nil
    }

    /// Saves the server URL and reconnects. Each server has its own demo account and SDK database, so a
    /// transfer still waiting for one server resumes when the app points at that server again.
    public func onServerUrlSaved() {
        var url = model.serverUrlField.trimmingCharacters(in: .whitespaces)
        while url.hasSuffix("/") { url.removeLast() }
        guard let parsed = URLComponents(string: url), ["http", "https"].contains(parsed.scheme ?? ""),
              !(parsed.host ?? "").isEmpty
        else {
            model.settingsError = "Enter a URL like \(DemoOptions.defaultServerUrl)"
            return
        }
        var m = model
        m.serverUrl = url
        m.serverUrlField = url
        m.settingsError = nil
        m.step = .form
        m.pending = nil
        m.recipient = ""
        m.amount = ""
        m.showValidation = false
        m.errorText = nil
        m.notice = nil
        model = m
        Task {
            await store.setServerUrl(url)
            await connect()
        }
    }

    /// The scene's phase: in the background the shared SDK spreads its network wake-ups.
    public func onForegroundChanged(_ foreground: Bool) {
        try? session?.sdk.setInForeground(foreground)
    }

    /// Retry after a failed start (server unreachable on first start).
    public func onRetryTapped() {
        Task { await connect() }
    }

    /// The screen goes away. The shared SDK stays open and sends in the background; what it cannot finish
    /// a BGProcessingTask drains later (`DemoBackground.drain`). Unfinished transfers are on disk either way.
    public func close() {
        finish(sdkToo: false)
    }

    /// Closes the SDK as well, as the process ending does (tests; a sign-out).
    public func shutdown() {
        finish(sdkToo: true)
    }

    private func finish(sdkToo: Bool) {
        guard !closed else { return }
        closed = true
        closeSession(sdkToo: sdkToo)
        ticker?.cancel()
        let open = continuations.values
        continuations.removeAll()
        open.forEach { $0.finish() }
    }

    // MARK: - inside

    /// Runs a tap's handler after every earlier tap's, in tap order: a handler that waits for the SDK (a new
    /// intent reads the store) must not be overtaken by the typing that follows it.
    private func inOrder(_ body: @escaping @MainActor () async -> Void) {
        pendingTaps += 1
        let previous = lastTap
        lastTap = Task {
            await previous?.value
            await body()
            self.pendingTaps -= 1
        }
    }

    /// A synchronous handler: at once when nothing is pending (a text field never lags), else in order.
    private func inOrderNow(_ body: @escaping @MainActor () -> Void) {
        if pendingTaps == 0 { body() } else { inOrder { body() } }
    }

    private func currency(_ m: Model) -> String {
        if let c = m.wallet?.currency, !c.isEmpty { return c }
        return options.currency
    }

    /// Returns false when the current transfer is still on its way (the composer refuses a new intent).
    private func startNewIntent() async -> Bool {
        guard let s = session else { return true }
        do {
            try await s.composer.newIntent()
            memory.transferId = nil
            return true
        } catch {
            model.errorText = Texts.errorText(error, currency: currency(model))
            return false
        }
    }

    private func closeSession(sdkToo: Bool = true) {
        guard let s = session else { return }
        session = nil
        s.close(sdkToo: sdkToo)
        composerState = .editing
        transfers = []
        finalCount = -1
        updateTicker()
        render()
    }

    private func connect() async {
        guard !closed else { return }
        connectGeneration += 1
        let generation = connectGeneration
        closeSession()
        let url = model.serverUrl
        var m = model
        m.loading = true
        m.setupError = nil
        m.wallet = nil
        m.balanceError = nil
        model = m
        let opened: Session
        do {
            opened = try await Self.openSession(
                url: url, directory: databaseDirectory, store: store, wallet: walletClient, options: options,
                trainMode: model.trainMode, networkAvailable: model.networkAvailable, savedTransferId: memory.transferId
            )
        } catch {
            if generation == connectGeneration { model.loading = false; model.setupError = Texts.setupText(url, error, currency: options.currency) }
            return
        }
        guard !closed, generation == connectGeneration else {
            opened.close(sdkToo: true)
            return
        }
        session = opened
        composerState = opened.composer.state
        memory.transferId = composerState.currentTransfer?.localId
        follow(opened)
        m = model
        m.loading = false
        if m.recipient.isEmpty { m.recipient = opened.account.recipientId }
        if case .editing = composerState {} else { m.notice = Self.resumedNotice }
        model = m
        await refreshBalance()
    }

    /// Signs up on first start and opens the SDK; every disk access runs off the MainActor (the account
    /// store is an actor, the SDK's calls are async, the directory is prepared on a detached task).
    private static func openSession(
        url: String, directory: URL, store: AccountStore, wallet: WalletClient, options: DemoOptions,
        trainMode: TrainMode, networkAvailable: Bool, savedTransferId: String?
    ) async throws -> Session {
        let account: DemoAccount
        if let saved = await store.account(serverUrl: url) {
            account = saved
        } else {
            account = try await wallet.signUp(serverUrl: url, balanceMinor: options.startingBalanceMinor, currency: options.currency)
            await store.save(account)
        }
        let openedAt = options.nowMs()
        let sdk = try await DemoBackground.sharedSdk(databaseDirectory: directory, account: account, options: options)
        do {
            // The shared instance may have run in the background since the last screen: set it as this one wants.
            try sdk.setInForeground(true)
            try await sdk.setNetworkProfile(trainMode.profile, seed: options.trainSeed ?? UInt64.random(in: 0 ... .max))
            try await sdk.setNetworkAvailable(networkAvailable)
            // After a kill: the SDK re-attaches the screen to the transfer it showed (a receipt included),
            // else to the newest unfinished one.
            let composer = try await sdk.restoreComposer(savedLocalId: savedTransferId)
            return Session(account: account, sdk: sdk, composer: composer, openedAtWallMs: openedAt)
        } catch {
            sdk.close()
            throw error
        }
    }

    /// Follows the composer's states and the SDK's list of transfers (both AsyncStreams of the bindings).
    private func follow(_ s: Session) {
        let states = s.composer.states()
        let lists = s.sdk.transferUpdates()
        s.tasks.append(Task { [weak self] in
            for await cs in states {
                guard let self, self.session === s else { return }
                self.composerState = cs
                self.updateTicker()
                self.render()
            }
        })
        s.tasks.append(Task { [weak self] in
            for await list in lists {
                guard let self, self.session === s else { return }
                self.transfers = list
                let finals = list.filter { $0.state.isFinal }.count
                if finals != self.finalCount {
                    // The balance follows every transfer that ends (and the first list after opening).
                    self.finalCount = finals
                    Task { await self.refreshBalance() }
                }
                self.render()
            }
        })
    }

    /// Ticks once a second while the screen shows a countdown, so "next try in Xs" counts down.
    private func updateTicker() {
        if case .waiting = composerState, session != nil {
            guard ticker == nil else { return }
            let tick = options.tickMs
            ticker = Task { [weak self] in
                while !Task.isCancelled {
                    try? await Task.sleep(nanoseconds: tick * 1_000_000)
                    self?.render()
                }
            }
        } else {
            ticker?.cancel()
            ticker = nil
        }
    }

    private func refreshBalance() async {
        guard let s = session else { return }
        do {
            let wallet = try await walletClient.wallet(serverUrl: s.account.serverUrl, token: s.account.token)
            if session === s { model.wallet = wallet; model.balanceError = nil }
        } catch {
            if session === s { model.balanceError = "can't reach the server" }
        }
    }

    /// The screen from the model, the composer and the SDK's list.
    private func render() {
        let m = model
        let cs = composerState
        var ui = DemoUiState()
        let screen: Screen
        switch cs {
        case .editing: screen = m.step
        case .submitting, .waiting: screen = .progress
        case .done: screen = .receipt
        case .rejected: screen = .rejected
        case .needsAttention: screen = .needsAttention
        }
        let validation = Texts.validation(recipient: m.recipient, amount: m.amount)
        ui.loading = m.loading
        ui.setupError = m.setupError
        if let w = m.wallet {
            ui.balanceText = "Balance: \(Texts.money(w.balanceMinor, w.currency))"
        } else if let e = m.balanceError {
            ui.balanceText = "Balance unavailable — \(e)"
        }
        ui.balanceMinor = m.wallet?.balanceMinor
        ui.accountText = session.map { "You: \($0.account.userId)" } ?? ""
        ui.accountUserId = session?.account.userId
        ui.screen = screen
        ui.recipient = m.recipient
        ui.amount = m.amount
        ui.validationText = (m.showValidation || !m.amount.isEmpty) ? validation : nil
        ui.reviewEnabled = validation == nil && session != nil
        if let p = m.pending, screen == .confirm || screen == .rejected {
            ui.confirmText = "Send \(Texts.money(p.amountMinor, p.currency)) to \(p.toUserId)?"
        }
        ui.transferTitle = cs.currentTransfer.map(Texts.title)
        // The composer's decision, read off the same state value the screen shows.
        ui.sendEnabled = session != nil && cs.sendEnabled
        switch cs {
        case .submitting:
            ui.showSpinner = true
            ui.statusLine = "Sending…"
        case let .waiting(transfer, needsAuth):
            ui.showSpinner = true
            ui.statusLine = Texts.waitingLine(transfer, needsAuth: needsAuth, sdkNowMs: sdkNow(), clockSpeed: options.clockSpeed)
        case let .done(r):
            ui.receipt = Receipt(
                title: "Sent \(Texts.title(r))", serverTransferId: r.serverTransferId ?? "", idempotencyKey: r.idempotencyKey,
                attempts: Int(r.attempts), replayNote: r.replayed ? Self.replayedNote : nil
            )
        default:
            break
        }
        switch cs {
        case let .rejected(reason, transfer): ui.errorText = m.errorText ?? Texts.rejectionText(reason, transfer)
        case .needsAttention: ui.errorText = m.errorText ?? Texts.needsAttention
        default: ui.errorText = m.errorText
        }
        ui.notice = m.notice
        ui.transfers = transfers.prefix(options.recentLimit).map {
            TransferRow(
                localId: $0.localId, title: Texts.title($0), stateLabel: Texts.stateLabel($0),
                serverTransferId: $0.serverTransferId, idempotencyKey: $0.idempotencyKey, settled: $0.state.isSettled
            )
        }
        ui.trainMode = m.trainMode
        ui.networkAvailable = m.networkAvailable
        ui.serverUrl = m.serverUrl
        ui.serverUrlField = m.serverUrlField
        ui.settingsError = m.settingsError
        state = ui
    }

    /// Now on the SDK's clock (which runs `clockSpeed` times faster than the wall clock).
    private func sdkNow() -> Int64 {
        let now = options.nowMs()
        guard let s = session, options.clockSpeed != 1 else { return now }
        return s.openedAtWallMs + Int64(Double(now - s.openedAtWallMs) * options.clockSpeed)
    }
}
