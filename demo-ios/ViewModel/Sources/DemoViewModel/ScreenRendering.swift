// What the screen shows, decided in one place: the demo's own model (what the user typed and chose) and
// the SDK's state rendered into `DemoUiState` by a pure function.
import Foundation
import SendOnce

/// What the user typed and chose; everything else on screen comes from the SDK.
struct DemoModel {
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

extension DemoUiState {
    /// The screen from the model, the composer's state and the SDK's list: a pure function, so what the
    /// screen says is decided in one place. `sdkNowMs` is now on the SDK's clock.
    static func render(
        _ m: DemoModel, composerState cs: ComposerState, transfers: [Transfer], account: DemoAccount?,
        options: DemoOptions, sdkNowMs: Int64
    ) -> DemoUiState {
        var ui = DemoUiState()
        let screen: Screen
        switch cs {
        case .editing: screen = m.step
        case .submitting, .waiting: screen = .progress
        case .done: screen = .receipt
        case .rejected: screen = .rejected
        // server-mock never asks for an action; were it to, the user has something to do.
        case .needsAttention, .requiresAction: screen = .needsAttention
        }
        let currency = m.wallet.map(\.currency).flatMap { $0.isEmpty ? nil : $0 } ?? options.currency
        let validation = Texts.validation(recipient: m.recipient, amount: m.amount, currency: currency)
        ui.loading = m.loading
        ui.setupError = m.setupError
        if let w = m.wallet {
            ui.balanceText = Texts.text("demo.balance", Texts.money(w.balanceMinor, w.currency))
        } else if let e = m.balanceError {
            ui.balanceText = Texts.text("demo.balance.unavailable", e)
        }
        ui.balanceMinor = m.wallet?.balanceMinor
        ui.accountText = account.map { Texts.text("demo.account", $0.userId) } ?? ""
        ui.accountUserId = account?.userId
        ui.screen = screen
        ui.recipient = m.recipient
        ui.amount = m.amount
        ui.validationText = (m.showValidation || !m.amount.isEmpty) ? validation : nil
        ui.reviewEnabled = validation == nil && account != nil
        if let p = m.pending, screen == .confirm || screen == .rejected {
            ui.confirmText = Texts.text("demo.confirm", Texts.money(p.amountMinor, p.currency), p.toUserId)
        }
        ui.transferTitle = cs.currentTransfer.map(Texts.title)
        // The composer's decision, read off the same state value the screen shows.
        ui.sendEnabled = account != nil && cs.sendEnabled
        if account != nil && !cs.sendEnabled {
            switch cs {
            case .submitting, .waiting: ui.sendHint = Texts.text("demo.send_off.in_flight")
            case .done: ui.sendHint = Texts.text("demo.send_off.done")
            default: break
            }
        }
        switch cs {
        case .submitting:
            ui.showSpinner = true
            ui.statusLine = Texts.text("demo.sending")
        case let .waiting(transfer, needsAuth):
            ui.showSpinner = true
            ui.statusLine = Texts.waitingLine(transfer, needsAuth: needsAuth, sdkNowMs: sdkNowMs, clockSpeed: options.clockSpeed)
        case let .done(r):
            ui.receipt = Receipt(
                title: Texts.text("demo.receipt.title", Texts.title(r)), serverTransferId: r.serverTransferId ?? "", idempotencyKey: r.idempotencyKey,
                attempts: Int(r.attempts), replayNote: r.replayed ? DemoViewModel.replayedNote : nil
            )
        default:
            break
        }
        switch cs {
        case let .rejected(reason, transfer): ui.errorText = m.errorText ?? Texts.rejectionText(reason, transfer)
        case .needsAttention, .requiresAction: ui.errorText = m.errorText ?? Texts.needsAttention
        default: ui.errorText = m.errorText
        }
        ui.notice = m.notice
        ui.transfers = transfers.prefix(options.recentLimit).map {
            TransferRow(
                localId: $0.localId, title: Texts.title($0), stateLabel: Texts.stateLabel($0),
                serverTransferId: $0.serverTransferId, idempotencyKey: $0.idempotencyKey, settled: $0.state.isSettled,
                announcement: Texts.announcement($0)
            )
        }
        ui.trainMode = m.trainMode
        ui.networkAvailable = m.networkAvailable
        ui.serverUrl = m.serverUrl
        ui.serverUrlField = m.serverUrlField
        ui.settingsError = m.settingsError
        return ui
    }
}
