import Foundation
import SendOnceFFI

/// One confirm screen's state machine (made by `SendOnce.composer()`). However often Send is tapped, one
/// intent is one transfer with one key: a second `confirm` while the first is unfinished returns the same
/// transfer. `sendEnabled` is false from the first confirm until a definitive no (after Done it stays
/// false until `newIntent()`).
public final class Composer: @unchecked Sendable {
    private let core: ComposerCore
    private let lock = NSLock()
    private var closed = false
    private let current: Broadcast<ComposerState>

    init(core: ComposerCore) throws {
        self.core = core
        current = Broadcast(try core.state())
        try core.setListener(listener: ComposerRelay(self))
        refresh()
    }

    deinit {
        close()
    }

    /// What the screen shows now.
    public var state: ComposerState { current.value }

    /// Whether the Send button is enabled now.
    public var sendEnabled: Bool { state.sendEnabled }

    /// The screen's states: the current one at once, then every change, in order. Ends on `close()`.
    public func states() -> AsyncStream<ComposerState> {
        current.stream()
    }

    /// The user tapped Send. Returns the transfer of this intent (the same one for every repeated tap).
    public func confirm(_ request: TransferRequest) async throws -> Transfer {
        defer { refresh() }
        return try await core.confirm(request: request)
    }

    /// Shorthand of `confirm(_:)` with the request's fields.
    public func confirm(to toUserId: String, amountMinor: Int64, currency: String, note: String? = nil) async throws -> Transfer {
        try await confirm(TransferRequest(toUserId: toUserId, amountMinor: amountMinor, currency: currency, note: note))
    }

    /// The transfer this screen follows, if confirmed.
    public func transfer() throws -> Transfer? {
        try core.transfer()
    }

    /// Starts a new intent ("send another"); throws `SendOnceError.TransferUnfinished` while one runs.
    public func newIntent() throws {
        try core.newIntent()
        refresh()
    }

    /// Stops following the transfer (the transfer itself goes on); ends every stream.
    public func close() {
        lock.lock()
        if closed {
            lock.unlock()
            return
        }
        closed = true
        lock.unlock()
        try? core.setListener(listener: nil)
        current.finish()
    }

    /// Re-reads the state from Rust; reads and publications are serialised, so streams never step back.
    fileprivate func refresh() {
        current.publish { _ in try? core.state() }
    }
}

private final class ComposerRelay: ComposerListener, @unchecked Sendable {
    weak var owner: Composer?

    init(_ owner: Composer) {
        self.owner = owner
    }

    func onStateChanged(state: ComposerState) throws {
        owner?.refresh()
    }
}
