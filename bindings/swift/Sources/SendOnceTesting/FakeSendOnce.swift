// An in-memory SendOnceClient for an app's unit tests: no server, no disk, no timing. The test plays the
// server: it answers each confirmed transfer (succeed, reject, ask for a step, ...) when it wants.
import Foundation
import SendOnce

/// The SDK for an app's unit tests, in memory: confirmed transfers wait in `.pending` until the test answers
/// them (`succeed`, `reject`, `fail`, `retrying`, `requireAction`, `needsAttention`, `authRequired`), or
/// `onSend` answers each as it is confirmed. Keys, local ids and the composer behave as the SDK's: one key
/// per transfer, kept across every state; a second tap returns the same transfer; Send stays disabled until
/// a definitive no. (`FakeAgreementTests` checks its composer mapping against the core's, state by state.)
public final class FakeSendOnce: SendOnceClient, @unchecked Sendable {
    private let lock = NSLock()
    private var list: [Transfer] = []
    private var serial = 0
    private var closed = false
    private var listeners: [UUID: AsyncStream<[Transfer]>.Continuation] = [:]
    private var profile: NetworkProfile = .off
    private var account: String?
    private let clock: @Sendable () -> Date

    /// Called with every transfer as it is confirmed (after it is stored): answer it here, or later.
    public var onSend: (@Sendable (FakeSendOnce, Transfer) -> Void)? {
        get { locked { onSendHook } }
        set { locked { onSendHook = newValue } }
    }
    private var onSendHook: (@Sendable (FakeSendOnce, Transfer) -> Void)?

    /// The last connectivity signal, lifecycle flag and token the app gave.
    public private(set) var networkAvailable: Bool?
    public private(set) var inForeground: Bool?
    public private(set) var accessToken: String?

    public init(clock: @escaping @Sendable () -> Date = { Date() }) {
        self.clock = clock
    }

    /// Every transfer and operation confirmed, oldest first (each once, however often Send was tapped).
    public var confirmed: [Transfer] { locked { list.reversed() } }

    // MARK: the test answers

    /// The server moved the money.
    @discardableResult
    public func succeed(_ localId: String, serverTransferId: String? = nil) throws -> Transfer {
        try answer(localId, .succeeded) { t in t.with(serverTransferId: serverTransferId ?? "srv-\(localId)", requiredAction: .some(nil)) }
    }

    /// A definitive no (nothing moved).
    @discardableResult
    public func reject(_ localId: String, _ reason: RejectionReason, code: String = "rejected", httpStatus: UInt16 = 402) throws -> Transfer {
        try answer(localId, .rejected) { $0.with(rejection: Rejection(reason: reason, code: code, detail: "", httpStatus: httpStatus)) }
    }

    /// Failed for good (a key reused with another body, or never executed per the look-up).
    @discardableResult
    public func fail(_ localId: String, _ reason: RejectionReason = .notExecuted, code: String = "not_executed") throws -> Transfer {
        try answer(localId, .failed) { $0.with(rejection: Rejection(reason: reason, code: code, detail: "", httpStatus: 0)) }
    }

    /// The outcome is unknown so far; the SDK would try again with the same key.
    @discardableResult
    public func retrying(_ localId: String, attempts: UInt32 = 1, lastError: String = "timeout") throws -> Transfer {
        try answer(localId, .retrying) { $0.with(attempts: attempts, lastError: lastError) }
    }

    /// The server asks the customer for a step (3-D Secure, SCA); parked until `actionCompleted`.
    @discardableResult
    public func requireAction(_ localId: String, _ action: RequiredAction) throws -> Transfer {
        try answer(localId, .requiresAction) { $0.with(requiredAction: .some(action)) }
    }

    /// The SDK stopped sending at its horizon; resolved by look-up, never by a new key.
    @discardableResult
    public func needsAttention(_ localId: String) throws -> Transfer { try answer(localId, .needsAttention) { $0 } }

    /// The server refused the credentials; waits for `setAccessToken`.
    @discardableResult
    public func authRequired(_ localId: String) throws -> Transfer { try answer(localId, .authRequired) { $0 } }

    // MARK: SendOnceClient

    public var transfers: AsyncStream<[Transfer]> {
        AsyncStream(bufferingPolicy: .bufferingNewest(1)) { continuation in
            let id = UUID()
            let current: [Transfer]? = locked {
                if closed { return nil }
                listeners[id] = continuation
                return list
            }
            guard let current else { return continuation.finish() }
            continuation.yield(current)
            continuation.onTermination = { [weak self] _ in self?.locked { self?.listeners[id] = nil } }
        }
    }

    public var currentTransfers: [Transfer] { locked { list } }

    public func sendTransfer(_ request: TransferRequest) async throws -> Transfer {
        guard request.amountMinor > 0 else { throw SendOnceError.InvalidAmount(detail: "amount_minor must be positive") }
        return try store("transfer", request.toUserId, request.amountMinor, request.currency, request.note)
    }

    public func sendOperation(_ operation: OperationRequest) async throws -> Transfer {
        try store(operation.operationType, operation.counterparty, operation.amountMinor, operation.currency, operation.note)
    }

    public func actionCompleted(_ localId: String) async throws -> Transfer {
        let t = try get(localId)
        guard t.state == .requiresAction else { return t }
        return try answer(localId, .pending) { $0.with(requiredAction: .some(nil)) }
    }

    public func transfer(_ localId: String) async throws -> Transfer { try get(localId) }

    public func transfers(after: String?, limit: Int) async throws -> [Transfer] {
        let all = try locked { () throws -> [Transfer] in try live(); return list }
        var from = 0
        if let after {
            guard let at = all.firstIndex(where: { $0.localId == after }) else { throw SendOnceError.NotFound(localId: after) }
            from = at + 1
        }
        return Array(all.dropFirst(from).prefix(min(max(limit, 0), 500)))
    }

    public func unfinishedTransfers() async throws -> [Transfer] {
        try locked { try live(); return list.filter { !$0.state.fakeFinal } }
    }

    public func transferUpdates(of localId: String) -> AsyncStream<Transfer> {
        transferStates(of: localId, in: transfers)
    }

    public func outcome(of localId: String) async throws -> Transfer {
        _ = try get(localId)
        for await list in transfers {
            if let t = list.first(where: { $0.localId == localId }), t.state.fakeSettled { return t }
        }
        throw SendOnceError.Closed
    }

    /// The look-up: a `.needsAttention` transfer stays so until the test answers it.
    public func resolve(_ localId: String) async throws -> Transfer { try get(localId) }

    public func setNetworkAvailable(_ available: Bool) async throws { try locked { try live(); networkAvailable = available } }

    public func setAccessToken(_ token: String?) async throws {
        let waiting = try locked { () throws -> [String] in
            try live()
            accessToken = token
            return list.filter { $0.state == .authRequired }.map(\.localId)
        }
        for id in waiting { try answer(id, .pending) { $0 } }
    }

    public func setNetworkProfile(_ profile: NetworkProfile, seed: UInt64 = 0) async throws {
        try locked { try live(); self.profile = profile }
    }

    public var currentNetworkProfile: NetworkProfile { locked { profile } }

    /// Nothing is sent here: says what is unfinished, as the SDK's drain would after its deadline.
    public func drain(deadline: TimeInterval) async throws -> DrainSummary {
        let all = try locked { () throws -> [Transfer] in try live(); return list }
        return DrainSummary(
            finished: all.filter { $0.state.fakeFinal }, unfinished: all.filter { !$0.state.fakeFinal },
            nextAttemptAt: nil, nextAttemptIn: nil, deadlineReached: false)
    }

    public func setInForeground(_ foreground: Bool) throws { try locked { try live(); inForeground = foreground } }

    public func accountId() async throws -> String? { try locked { try live(); return account } }

    public func signIn(accountId: String, token: String?) async throws -> WipeReport? {
        try locked { () throws -> WipeReport? in
            try live()
            accessToken = token
            guard let bound = account, bound != accountId else {
                account = accountId
                return nil
            }
            if list.contains(where: { !$0.state.fakeFinal }) {
                throw SendOnceError.AccountMismatch(detail: "bound to \(bound), which has unfinished transfers")
            }
            account = accountId
            return wipe(force: false)
        }
    }

    public func signOut(force: Bool = false) async throws -> WipeReport {
        try locked { () throws -> WipeReport in
            try live()
            let unfinished = list.filter { !$0.state.fakeFinal }.count
            if !force && unfinished > 0 { throw SendOnceError.UnfinishedTransfers(count: UInt32(unfinished)) }
            accessToken = nil
            account = nil
            return wipe(force: force)
        }
    }

    public func composer() async throws -> FakeComposer { try locked { try live() }; return FakeComposer(self, following: nil) }

    public func composer(for localId: String) async throws -> FakeComposer { FakeComposer(self, following: try get(localId).localId) }

    public func restoreComposer(savedLocalId: String?) async throws -> FakeComposer {
        let all = try locked { () throws -> [Transfer] in try live(); return list }
        let follow = all.first { $0.localId == savedLocalId } ?? all.first { !$0.state.fakeFinal }
        return FakeComposer(self, following: follow?.localId)
    }

    /// Ends every stream; later calls throw `.Closed`.
    public func close() {
        let ending: [AsyncStream<[Transfer]>.Continuation] = locked {
            if closed { return [] }
            closed = true
            defer { listeners = [:] }
            return Array(listeners.values)
        }
        ending.forEach { $0.finish() }
    }

    // MARK: inside

    func get(_ localId: String) throws -> Transfer {
        try locked {
            try live()
            guard let t = list.first(where: { $0.localId == localId }) else { throw SendOnceError.NotFound(localId: localId) }
            return t
        }
    }

    private func store(_ type: String, _ to: String, _ amount: Int64, _ currency: String, _ note: String?) throws -> Transfer {
        let now = clock()
        let t = try locked { () throws -> Transfer in
            try live()
            serial += 1
            return Transfer(
                localId: "fake-\(serial)", idempotencyKey: UUID().uuidString.lowercased(), toUserId: to, amountMinor: amount,
                currency: currency, note: note, state: .pending, attempts: 0, createdAt: now, updatedAt: now,
                lastAttemptAt: nil, nextAttemptAt: nil, lastError: nil, serverTransferId: nil, rejection: nil,
                replayed: false, operationType: type, requiredAction: nil)
        }
        put(t)
        onSend?(self, t)
        return try get(t.localId)
    }

    private func answer(_ localId: String, _ state: TransferState, _ change: (Transfer) -> Transfer) throws -> Transfer {
        let t = change(try get(localId)).with(state: state, updatedAt: clock())
        put(t)
        return t
    }

    private func put(_ t: Transfer) {
        let (now, sinks): ([Transfer], [AsyncStream<[Transfer]>.Continuation]) = locked {
            if closed { return ([], []) }
            list.removeAll { $0.localId == t.localId }
            list.append(t)
            list.sort { serialOf($0) > serialOf($1) }  // newest first
            return (list, Array(listeners.values))
        }
        sinks.forEach { $0.yield(now) }
    }

    private func wipe(force: Bool) -> WipeReport {
        let done = list.filter { $0.state.fakeFinal }
        let open = list.filter { !$0.state.fakeFinal }
        list = []
        let sinks = Array(listeners.values)
        sinks.forEach { $0.yield([]) }
        return WipeReport(discardedUnfinished: force ? open : [], deletedFinished: UInt32(done.count))
    }

    private func live() throws {
        if closed { throw SendOnceError.Closed }
    }

    private func locked<T>(_ body: () throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body()
    }
}

private func serialOf(_ t: Transfer) -> Int { Int(t.localId.dropFirst("fake-".count)) ?? 0 }

extension TransferState {
    /// Final: nothing more will happen (the core's `TransferState::is_final`).
    var fakeFinal: Bool { self == .succeeded || self == .rejected || self == .failed }
    /// Settled: final, or handed to the user (the core's `TransferState::is_settled`).
    var fakeSettled: Bool { fakeFinal || self == .needsAttention || self == .requiresAction }
}

extension Transfer {
    /// A copy with some fields changed (the generated struct's fields are `let`).
    func with(
        state: TransferState? = nil, updatedAt: Date? = nil, attempts: UInt32? = nil, lastError: String? = nil,
        serverTransferId: String? = nil, rejection: Rejection? = nil, requiredAction: RequiredAction?? = nil
    ) -> Transfer {
        Transfer(
            localId: localId, idempotencyKey: idempotencyKey, toUserId: toUserId, amountMinor: amountMinor,
            currency: currency, note: note, state: state ?? self.state, attempts: attempts ?? self.attempts,
            createdAt: createdAt, updatedAt: updatedAt ?? self.updatedAt, lastAttemptAt: lastAttemptAt,
            nextAttemptAt: nextAttemptAt, lastError: lastError ?? self.lastError,
            serverTransferId: serverTransferId ?? self.serverTransferId, rejection: rejection ?? self.rejection,
            replayed: replayed, operationType: operationType, requiredAction: requiredAction ?? self.requiredAction)
    }
}
