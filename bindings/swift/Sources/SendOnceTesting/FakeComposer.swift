import Foundation
import SendOnce

/// A confirm screen over `FakeSendOnce`, with the SDK's rules: one transfer per intent (a second tap returns
/// it), Send disabled from the first confirm until a definitive no, `newIntent()` only once the transfer is
/// final. Its state follows the fake's transfer as the test answers it (`composerState(of:)`).
public final class FakeComposer: ComposerClient, @unchecked Sendable {
    private let sdk: FakeSendOnce
    private let lock = NSLock()
    private var following: String?
    private var closed = false
    private var confirming = false

    init(_ sdk: FakeSendOnce, following: String?) {
        self.sdk = sdk
        self.following = following
    }

    public var state: ComposerState {
        let id = locked { following }
        guard let id, let t = sdk.currentTransfers.first(where: { $0.localId == id }) else { return .editing }
        return composerState(of: t)
    }

    public var sendEnabled: Bool { state.fakeSendEnabled }

    public func states() -> AsyncStream<ComposerState> {
        let lists = sdk.transfers
        return AsyncStream(bufferingPolicy: .bufferingNewest(1)) { continuation in
            let task = Task { [weak self] in
                var last: ComposerState?
                for await _ in lists {
                    guard let self, !self.locked({ self.closed }) else { break }
                    let now = self.state
                    if now != last { continuation.yield(now); last = now }
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    public func confirm(_ request: TransferRequest) async throws -> Transfer {
        try await confirmWith { try await self.sdk.sendTransfer(request) }
    }

    public func confirm(_ operation: OperationRequest) async throws -> Transfer {
        try await confirmWith { try await self.sdk.sendOperation(operation) }
    }

    private func confirmWith(_ send: () async throws -> Transfer) async throws -> Transfer {
        // One confirm at a time, as the SDK's confirm lock: two racing taps still make one transfer.
        while !locked({ () -> Bool in if confirming { return false }; confirming = true; return true }) {
            await Task.yield()
        }
        defer { locked { confirming = false } }
        let id = try locked { () throws -> String? in
            if closed { throw SendOnceError.Closed }
            return following
        }
        if let id {
            let existing = try await sdk.transfer(id)
            if !composerState(of: existing).fakeSendEnabled { return existing }
        }
        let t = try await send()
        locked { following = t.localId }
        return t
    }

    public func transfer() async throws -> Transfer? {
        let id = try locked { () throws -> String? in
            if closed { throw SendOnceError.Closed }
            return following
        }
        guard let id else { return nil }
        return try await sdk.transfer(id)
    }

    public func newIntent() async throws {
        if let t = try await transfer(), !t.state.fakeFinal { throw SendOnceError.TransferUnfinished }
        locked { following = nil }
    }

    public func close() {
        locked { closed = true }
    }

    private func locked<T>(_ body: () throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body()
    }
}

/// What a confirm screen following `t` shows: the same mapping as the core's `ComposerState::of` (the
/// package's FakeAgreementTests check the two agree for every state, through the native library).
public func composerState(of t: Transfer) -> ComposerState {
    switch t.state {
    case .pending: return .submitting(transfer: t)
    case .sending: return t.attempts <= 1 ? .submitting(transfer: t) : .waiting(transfer: t, needsAuth: false)
    case .retrying: return .waiting(transfer: t, needsAuth: false)
    case .authRequired: return .waiting(transfer: t, needsAuth: true)
    case .succeeded: return .done(receipt: t)
    case .rejected, .failed:
        return .rejected(
            reason: t.rejection ?? Rejection(reason: .other(code: "unknown"), code: "unknown", detail: "", httpStatus: 0),
            transfer: t)
    case .needsAttention: return .needsAttention(transfer: t)
    case .requiresAction:
        return .requiresAction(transfer: t, action: t.requiredAction ?? RequiredAction(code: "unknown", url: nil, challengeId: nil))
    }
}

extension ComposerState {
    /// Send is enabled while editing and after a definitive no (the core's `ComposerState::send_enabled`).
    var fakeSendEnabled: Bool {
        switch self {
        case .editing, .rejected: return true
        default: return false
        }
    }
}
