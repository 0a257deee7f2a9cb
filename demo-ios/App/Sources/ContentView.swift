// Layout only: every text, flag and list below comes from DemoUiState; every tap calls one `on…` method.
import DemoViewModel
import SwiftUI
#if canImport(UIKit)
import UIKit
#endif

struct ContentView: View {
    let vm: DemoViewModel
    @State private var ui = DemoUiState()
    /// Transfers whose outcome VoiceOver has said (nil until the first loaded list: those are not announced).
    @State private var announced: Set<String>? = nil

    var body: some View {
        NavigationStack {
            List {
                balanceSection
                if let error = ui.setupError {
                    Section {
                        Text(error).foregroundStyle(.red)
                        Button("Retry") { vm.onRetryTapped() }
                    }
                }
                transferSection
                trainModeSection
                Section("Recent transfers") {
                    if ui.transfers.isEmpty { Text("No transfers yet.") }
                    ForEach(ui.transfers) { row in
                        VStack(alignment: .leading, spacing: 2) {
                            Text(row.title)
                            Text(row.stateLabel).font(.footnote).foregroundStyle(.secondary)
                            if let id = row.serverTransferId { Text(id).font(.caption.monospaced()) }
                        }
                        // One VoiceOver stop per transfer: title, state and id read together.
                        .accessibilityElement(children: .combine)
                    }
                }
                settingsSection
            }
            .navigationTitle("sendonce demo")
        }
        // The view model publishes its whole state as a stream; the view mirrors it.
        .task { for await state in vm.states() { ui = state } }
        .onChange(of: ui.transfers) { rows in announce(rows) }
    }

    /// VoiceOver says each transfer's outcome once (the view model's text), also one that ended in the
    /// background; the rows already finished when the screen first loaded are not announced.
    private func announce(_ rows: [TransferRow]) {
        guard !ui.loading else { return }
        var seen = announced ?? []
        let first = announced == nil
        for row in rows {
            guard let text = row.announcement, seen.insert(row.localId).inserted, !first else { continue }
            #if canImport(UIKit)
            UIAccessibility.post(notification: .announcement, argument: text)
            #endif
        }
        announced = seen
    }

    private var balanceSection: some View {
        Section {
            Text(ui.balanceText).font(.title2)
            Text(ui.accountText).font(.footnote).foregroundStyle(.secondary)
            Text(ui.networkAvailable ? LocalizedStringKey("Network: available") : LocalizedStringKey("Network: none")).font(.footnote).foregroundStyle(.secondary)
            Button("Refresh balance") { vm.onRefreshBalanceTapped() }
        }
    }

    @ViewBuilder
    private var transferSection: some View {
        Section("Send money") {
            if ui.loading {
                HStack { ProgressView(); Text("Connecting to \(ui.serverUrl)…") }
            }
            if let notice = ui.notice { Text(notice).font(.footnote) }
            switch ui.screen {
            case .form:
                TextField("Recipient user id", text: binding(\.recipient, vm.onRecipientChanged))
                    .textInputAutocapitalization(.never)
                    .autocorrectionDisabled()
                TextField("Amount (BDT)", text: binding(\.amount, vm.onAmountChanged))
                    .keyboardType(.decimalPad)
                if let v = ui.validationText { ErrorText(text: v) }
                Button("Review") { vm.onReviewTapped() }.disabled(!ui.reviewEnabled)
            case .confirm, .rejected, .progress:
                Text(ui.confirmText ?? ui.transferTitle ?? "").font(.headline)
                if ui.showSpinner {
                    // One VoiceOver stop whose text changes ("attempt 3, next try in 4 s"); the spinner is decoration.
                    HStack { ProgressView().accessibilityHidden(true); Text(ui.statusLine ?? "") }
                        .accessibilityElement(children: .combine)
                        .accessibilityAddTraits(.updatesFrequently)
                }
                if let e = ui.errorText { ErrorText(text: e) }
                // Enabled exactly when the composer says so: tap it ten times, one transfer leaves. When it is
                // off, VoiceOver says why (the view model's text).
                Button("Send") { vm.onSendTapped() }.disabled(!ui.sendEnabled).accessibilityHint(ui.sendHint ?? "")
                if ui.screen != .progress { Button("Edit") { vm.onEditTapped() } }
            case .receipt:
                if let r = ui.receipt {
                    Text(r.title).font(.headline)
                    Text("Transfer id: \(r.serverTransferId)").font(.body.monospaced())
                    Text("Idempotency key: \(r.idempotencyKey)").font(.caption.monospaced())
                    Text("Attempts: \(r.attempts)").font(.footnote)
                    if let note = r.replayNote { Text(note).font(.footnote) }
                }
                Button("Send") { vm.onSendTapped() }.disabled(!ui.sendEnabled).accessibilityHint(ui.sendHint ?? "")
                Button("Send another") { vm.onSendAnotherTapped() }
            case .needsAttention:
                Text(ui.transferTitle ?? "").font(.headline)
                if let e = ui.errorText { ErrorText(text: e) }
                Button("Check again") { vm.onCheckAgainTapped() }
                Button("Send another") { vm.onSendAnotherTapped() }
            }
        }
    }

    private var trainModeSection: some View {
        Section {
            Picker("Train mode", selection: Binding(get: { ui.trainMode }, set: { vm.onTrainModeSelected($0) })) {
                ForEach(ui.trainModes) { Text($0.label).tag($0) }
            }
            .pickerStyle(.segmented)
            Text(ui.trainMode.description).font(.footnote).foregroundStyle(.secondary)
        } header: {
            Text("Train mode")
        }
    }

    private var settingsSection: some View {
        Section("Settings") {
            TextField("Server URL", text: binding(\.serverUrlField, vm.onServerUrlChanged))
                .keyboardType(.URL)
                .textInputAutocapitalization(.never)
                .autocorrectionDisabled()
            if let e = ui.settingsError { ErrorText(text: e) }
            Button("Save and reconnect") { vm.onServerUrlSaved() }
        }
    }

    /// A text field shows the view model's current value (updated synchronously on the main actor, so
    /// typing never lags behind the stream) and reports every edit to it.
    private func binding(_ keyPath: KeyPath<DemoUiState, String>, _ set: @escaping (String) -> Void) -> Binding<String> {
        Binding(get: { vm.state[keyPath: keyPath] }, set: { set($0) })
    }
}

/// An error: VoiceOver announces it when it appears (not only when the user reaches it).
struct ErrorText: View {
    let text: String

    var body: some View {
        Text(text).foregroundStyle(.red)
            .onAppear {
                #if canImport(UIKit)
                UIAccessibility.post(notification: .announcement, argument: text)
                #endif
            }
    }
}
