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
/// the background, where the bindings' `BackgroundSending` (extra time, then a BGAppRefreshTask) finishes what is left.
@MainActor
public final class DemoViewModel {
    /// The notice after re-attaching to a transfer confirmed before the process died.
    nonisolated public static var resumedNotice: String { Texts.text("demo.notice.resumed") }
    /// The receipt's note when the server replayed its stored answer.
    nonisolated public static var replayedNote: String { Texts.text("demo.note.replayed") }

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
    private var model: DemoModel { didSet { render() } }
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
        model = DemoModel(serverUrl: options.defaultServerUrl, serverUrlField: options.defaultServerUrl)
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
        guard Texts.validation(recipient: model.recipient, amount: model.amount, currency: currency(model)) == nil,
              case let .valid(minor) = Texts.parseAmount(model.amount, currency: currency(model))
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
            model.settingsError = Texts.text("demo.settings.url", DemoOptions.defaultServerUrl)
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
    /// a BGAppRefreshTask drains later (`BackgroundSending.handleRefresh`). Unfinished transfers are on disk either way.
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

    private func currency(_ m: DemoModel) -> String {
        if let c = m.wallet?.currency, !c.isEmpty { return c }
        return options.currency
    }

    /// Returns false when the current transfer is still on its way (the composer refuses a new intent).
    private func startNewIntent() async -> Bool {
        guard let s = session else { return true }
        // Forgotten before the composer moves on: its new state shows the form at once, and a process
        // death from then on must restore the form, not the old receipt.
        let saved = memory.transferId
        memory.transferId = nil
        do {
            try await s.composer.newIntent()
            return true
        } catch {
            memory.transferId = saved
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
            opened = try await Session.open(
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

    /// Follows the composer's states and the SDK's list of transfers (both AsyncStreams of the bindings).
    private func follow(_ s: Session) {
        let states = s.composer.states()
        let lists = s.sdk.transfers
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
            if session === s { model.balanceError = Texts.text("demo.balance.unreachable") }
        }
    }

    /// The screen from the model, the composer and the SDK's list (`ScreenRendering.swift`).
    private func render() {
        state = DemoUiState.render(
            model, composerState: composerState, transfers: transfers, account: session?.account, options: options,
            sdkNowMs: sdkNow()
        )
    }

    /// Now on the SDK's clock (which runs `clockSpeed` times faster than the wall clock).
    private func sdkNow() -> Int64 {
        let now = options.nowMs()
        guard let s = session, options.clockSpeed != 1 else { return now }
        return s.openedAtWallMs + Int64(Double(now - s.openedAtWallMs) * options.clockSpeed)
    }
}
