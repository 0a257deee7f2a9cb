import Foundation
@_spi(SendOnceInternal) import SendOnceFFI

/// One confirm screen's state machine (made by `SendOnce.composer()`). However often Send is tapped, one
/// intent is one transfer with one key: a second `confirm` while the first is unfinished returns the same
/// transfer. `sendEnabled` is false from the first confirm until a definitive no (after Done it stays
/// false until `newIntent()`). Calls that touch the disk are `async` and run off the caller's thread.
public final class Composer: Sendable {
    private let core: ComposerCore
    private let closed = Locked(false)
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

    /// What the screen shows now (memory, no I/O).
    public var state: ComposerState { current.value }

    /// Whether the Send button is enabled now.
    public var sendEnabled: Bool { state.sendEnabled }

    /// The screen's states: the current one at once, then every change, in order. Ends on `close()` (or
    /// when the SDK closes).
    public func states() -> AsyncStream<ComposerState> {
        current.stream()
    }

    /// The user tapped Send. Returns the transfer of this intent (the same one for every repeated tap).
    public func confirm(_ request: TransferRequest) async throws -> Transfer {
        let core = try live()
        defer { refresh() }
        return try await cancellable { _ in try await core.confirm(request: request) }
    }

    /// The user tapped Send on an operation of the app's own API: one key per intent; a repeated tap (also
    /// while the operation waits in `.requiresAction`) returns the same one.
    public func confirm(_ operation: OperationRequest) async throws -> Transfer {
        let core = try live()
        defer { refresh() }
        return try await cancellable { _ in try await core.confirmOperation(operation: operation) }
    }

    /// The transfer this screen follows, if confirmed (read from the store).
    public func transfer() async throws -> Transfer? {
        let core = try live()
        return try await offCallerThread { try core.transfer() }
    }

    /// Starts a new intent ("send another"); throws `SendOnceError.TransferUnfinished` while one runs.
    public func newIntent() async throws {
        let core = try live()
        try await offCallerThread { try core.newIntent() }
        refresh()
    }

    /// Stops following the transfer (the transfer itself goes on); ends every stream.
    public func close() {
        let first = closed.withLock { c in
            defer { c = true }
            return !c
        }
        guard first else { return }
        try? core.setListener(listener: nil)
        current.finish()
    }

    private func live() throws -> ComposerCore {
        if closed.withLock({ $0 }) { throw SendOnceError.Closed }
        return core
    }

    /// Re-reads the state (memory) from Rust; reads and publications are serialised, so streams never step back.
    fileprivate func refresh() {
        current.publish { _ in try? core.state() }
    }
}

private final class ComposerRelay: ComposerListener {
    private let owner: Locked<Weak<Composer>>

    init(_ owner: Composer) {
        self.owner = Locked(Weak(value: owner))
    }

    func onStateChanged(state: ComposerState) throws {
        owner.withLock { $0.value }?.refresh()
    }
}
