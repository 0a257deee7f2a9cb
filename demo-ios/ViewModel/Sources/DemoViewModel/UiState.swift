import Foundation
import SendOnce

/// What the whole screen shows; the SwiftUI shell lays this out and nothing else.
public struct DemoUiState: Equatable, Sendable {
    /// True until the SDK is open (first start, or after the server URL changed).
    public var loading = true
    /// Why the app could not start (server unreachable on first start, bad URL, storage); nil when fine.
    public var setupError: String?

    /// "Balance: 10,000.00 BDT", "Balance: …" while loading, or why it is unavailable.
    public var balanceText = Texts.text("demo.balance.loading")
    public var balanceMinor: Int64?
    /// "You: usr_…" — the demo account on this server.
    public var accountText = ""
    /// The demo account's user id on this server (nil until signed up).
    public var accountUserId: String?

    /// Which part of the screen is in front.
    public var screen: Screen = .form
    public var recipient = ""
    public var amount = ""
    /// Live validation text under the form; nil when the form is valid.
    public var validationText: String?
    /// True when the Review button is enabled (the form is valid and the SDK is open).
    public var reviewEnabled = false
    /// "Send 12.50 BDT to usr_…?" on the confirm step.
    public var confirmText: String?
    /// "12.50 BDT to usr_…": the transfer the confirm screen follows (progress, receipt, rejection).
    public var transferTitle: String?
    /// The Send button: the composer's `sendEnabled`.
    public var sendEnabled = false
    /// Why Send is off, for VoiceOver (the button's hint); nil while it is on.
    public var sendHint: String?
    /// A spinner next to the status line.
    public var showSpinner = false
    /// "Sending…", or "Waiting for network — attempt N, next try in Xs" while retrying.
    public var statusLine: String?
    /// The receipt after Done.
    public var receipt: Receipt?
    /// What went wrong with the last Send (typed SDK error or the server's definitive no).
    public var errorText: String?
    /// One-off information, e.g. "Resumed a transfer confirmed before the app was closed…".
    public var notice: String?

    /// Recent transfers, newest first, with human state labels.
    public var transfers: [TransferRow] = []

    /// Train mode (the SDK's network simulator).
    public var trainMode: TrainMode = .off
    public var trainModes: [TrainMode] = TrainMode.allCases
    /// What the host OS says about connectivity (forwarded to the SDK).
    public var networkAvailable = true

    /// Settings: the server URL in use, the one being edited, and why it cannot be used.
    public var serverUrl = DemoOptions.defaultServerUrl
    public var serverUrlField = DemoOptions.defaultServerUrl
    public var settingsError: String?

    public init() {}
}

/// The part of the screen in front.
public enum Screen: String, Sendable {
    /// Recipient and amount.
    case form
    /// "Send X to Y?" with the Send button.
    case confirm
    /// Spinner and status line while the SDK sends or waits to retry.
    case progress
    /// The money moved: receipt with the server's transfer id.
    case receipt
    /// A definitive no from the server (nothing moved); Send is enabled again for a corrected request.
    case rejected
    /// The SDK stopped retrying; the outcome is resolved by a status look-up, never by a new key.
    case needsAttention
}

/// The receipt of a succeeded transfer.
public struct Receipt: Equatable, Sendable {
    public var title: String
    public var serverTransferId: String
    public var idempotencyKey: String
    public var attempts: Int
    /// Set when the server replayed its stored answer (the first answer was lost on the way).
    public var replayNote: String?
}

/// One line of the recent transfers list.
public struct TransferRow: Equatable, Sendable, Identifiable {
    public var id: String { localId }
    public var localId: String
    /// "12.50 BDT to usr_…"
    public var title: String
    /// "Sent", "Waiting for network (attempt 3)", "Declined — not enough money", ...
    public var stateLabel: String
    public var serverTransferId: String?
    public var idempotencyKey: String
    public var settled: Bool
    /// What a screen reader announces once this transfer has an outcome (Texts.announcement), else nil.
    public var announcement: String? = nil
}

/// The Train-mode selector: the SDK's network profiles a demo switches between.
public enum TrainMode: String, CaseIterable, Sendable, Identifiable {
    case off, train, offline, lbReplay

    public var id: String { rawValue }

    /// The chip's label in the demo's locale (`demo.train.<case>`).
    public var label: String { Texts.text("demo.train.\(rawValue)") }

    /// One line on what the profile does.
    public var description: String { Texts.text("demo.train.\(rawValue).description") }

    public var profile: NetworkProfile {
        switch self {
        case .off: return .off
        case .train: return .train
        case .offline: return .offline
        case .lbReplay: return .lbReplay
        }
    }
}

/// How the demo is wired; the defaults are the app's, tests override a few.
public struct DemoOptions: Sendable {
    /// server-mock on the development Mac as the iOS simulator sees it.
    public static let defaultServerUrl = "http://localhost:8080"

    public var defaultServerUrl: String
    public var currency: String
    /// Opening balance of the demo user created on first start (10,000.00 BDT).
    public var startingBalanceMinor: Int64
    /// Retry schedule; nil for the SDK's defaults (0.5 s base, 60 s cap, 24 h give-up).
    public var retry: RetryPolicy?
    public var requestTimeout: TimeInterval
    /// The SDK clock's speed (1 on a device; tests speed up train mode's minutes-long tunnels).
    public var clockSpeed: Double
    /// Seed of train mode's faults; nil for a new one at every switch.
    public var trainSeed: UInt64?
    /// How often the "next try in Xs" countdown is refreshed.
    public var tickMs: UInt64
    /// How many recent transfers the list shows.
    public var recentLimit: Int
    /// Wall clock (ms since the epoch).
    public var nowMs: @Sendable () -> Int64

    public init(
        defaultServerUrl: String = DemoOptions.defaultServerUrl,
        currency: String = "BDT",
        startingBalanceMinor: Int64 = 1_000_000,
        retry: RetryPolicy? = nil,
        requestTimeout: TimeInterval = 15,
        clockSpeed: Double = 1.0,
        trainSeed: UInt64? = nil,
        tickMs: UInt64 = 1_000,
        recentLimit: Int = 20,
        nowMs: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970 * 1000) }
    ) {
        self.defaultServerUrl = defaultServerUrl
        self.currency = currency
        self.startingBalanceMinor = startingBalanceMinor
        self.retry = retry
        self.requestTimeout = requestTimeout
        self.clockSpeed = clockSpeed
        self.trainSeed = trainSeed
        self.tickMs = tickMs
        self.recentLimit = recentLimit
        self.nowMs = nowMs
    }
}
