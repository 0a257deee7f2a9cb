// What an app's screens, view models and background tasks call, as protocols: `SendOnce` and `Composer`
// conform over the native core; `FakeSendOnce` (product SendOnceTesting) conforms in memory, so an app's
// own screens are unit-tested without a server, a disk or timing.
import Foundation
import SendOnceFFI

/// The SDK as an app's code sees it. Type view models against `any SendOnceClient`, pass
/// `SendOnce.shared(_:)` in the app and `FakeSendOnce` in unit tests. Every call may throw `SendOnceError`;
/// after `close()` every call throws `.Closed` and every stream ends.
public protocol SendOnceClient<Composing>: AnyObject, Sendable {
    /// The composer this client makes (`Composer`, or the fake's).
    associatedtype Composing: ComposerClient
    /// Every transfer, newest first: the current list at once, then after every change.
    var transfers: AsyncStream<[Transfer]> { get }
    /// The latest list `transfers` delivered (no I/O).
    var currentTransfers: [Transfer] { get }
    /// The user confirmed: mints the key, commits the transfer durably and returns it.
    func sendTransfer(_ request: TransferRequest) async throws -> Transfer
    /// The user confirmed an operation of the app's own API.
    func sendOperation(_ operation: OperationRequest) async throws -> Transfer
    /// The customer completed the step the server asked for: sent again, same key and bytes.
    func actionCompleted(_ localId: String) async throws -> Transfer
    /// One transfer by local id (`.NotFound` if there is none).
    func transfer(_ localId: String) async throws -> Transfer
    /// One page of the history, newest first.
    func transfers(after: String?, limit: Int) async throws -> [Transfer]
    /// Transfers not yet final, newest first.
    func unfinishedTransfers() async throws -> [Transfer]
    /// One transfer's states until it is settled (`transferStates(of:in:)` over `transfers`).
    func transferUpdates(of localId: String) -> AsyncStream<Transfer>
    /// Waits until the transfer is settled (final, `.needsAttention` or `.requiresAction`).
    func outcome(of localId: String) async throws -> Transfer
    /// Resolves a `.needsAttention` transfer through the status look-up by key (never a new key).
    func resolve(_ localId: String) async throws -> Transfer
    /// The host app's connectivity signal.
    func setNetworkAvailable(_ available: Bool) async throws
    /// Replaces the bearer token (nil to forget it).
    func setAccessToken(_ token: String?) async throws
    /// Train mode: switches the network simulator; `seed` makes its faults reproducible.
    func setNetworkProfile(_ profile: NetworkProfile, seed: UInt64) async throws
    /// The profile in force now (no I/O).
    var currentNetworkProfile: NetworkProfile { get }
    /// Sends and resolves what is due within `deadline` seconds (a background task's call).
    func drain(deadline: TimeInterval) async throws -> DrainSummary
    /// The app's lifecycle (a flag, no I/O).
    func setInForeground(_ foreground: Bool) throws
    /// The account the store is bound to, if any.
    func accountId() async throws -> String?
    /// Signs `accountId` in with `token`.
    func signIn(accountId: String, token: String?) async throws -> WipeReport?
    /// Forgets the token and deletes every transfer and the account binding.
    func signOut(force: Bool) async throws -> WipeReport
    /// A composer for one confirm screen.
    func composer() async throws -> Composing
    /// The composer of a transfer confirmed earlier.
    func composer(for localId: String) async throws -> Composing
    /// The composer for a confirm screen that may have been killed: its saved local id, or nil.
    func restoreComposer(savedLocalId: String?) async throws -> Composing
    /// Stops sending (the fake: stops answering); every stream ends.
    func close()
}

/// One confirm screen's state machine as a screen sees it; `Composer` conforms over the core.
public protocol ComposerClient: AnyObject, Sendable {
    /// What the screen shows now (memory, no I/O).
    var state: ComposerState { get }
    /// Whether the Send button is enabled now.
    var sendEnabled: Bool { get }
    /// The screen's states: the current one at once, then every change.
    func states() -> AsyncStream<ComposerState>
    /// The user tapped Send: the transfer of this intent (the same one for every repeated tap).
    func confirm(_ request: TransferRequest) async throws -> Transfer
    /// The user tapped Send on an operation of the app's own API.
    func confirm(_ operation: OperationRequest) async throws -> Transfer
    /// The transfer this screen follows, if confirmed.
    func transfer() async throws -> Transfer?
    /// Starts a new intent; `.TransferUnfinished` while one runs.
    func newIntent() async throws
    /// Stops following the transfer; ends every stream.
    func close()
}

public extension SendOnceClient {
    /// Shorthand of `sendTransfer(_:)` with the request's fields (`amountMinor` in minor units of `currency`).
    func sendTransfer(to toUserId: String, amountMinor: Int64, currency: String, note: String? = nil) async throws -> Transfer {
        try await sendTransfer(TransferRequest(toUserId: toUserId, amountMinor: amountMinor, currency: currency, note: note))
    }
}

public extension ComposerClient {
    /// Shorthand of `confirm(_:)` with the request's fields (`amountMinor` in minor units of `currency`).
    func confirm(to toUserId: String, amountMinor: Int64, currency: String, note: String? = nil) async throws -> Transfer {
        try await confirm(TransferRequest(toUserId: toUserId, amountMinor: amountMinor, currency: currency, note: note))
    }
}

/// The states of one transfer read from a list stream: the current one at once, then every change, until it
/// is settled or the stream ends. What `SendOnce.transferUpdates(of:)` and a fake's are made of.
public func transferStates(of localId: String, in lists: AsyncStream<[Transfer]>) -> AsyncStream<Transfer> {
    AsyncStream { continuation in
        let task = Task {
            var last: Transfer?
            for await list in lists {
                guard let t = list.first(where: { $0.localId == localId }), t != last else { continue }
                last = t
                continuation.yield(t)
                if t.state.isSettled { break }
            }
            continuation.finish()
        }
        continuation.onTermination = { _ in task.cancel() }
    }
}

extension SendOnce: SendOnceClient {}
extension Composer: ComposerClient {}
