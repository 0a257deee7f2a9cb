// The idiomatic Swift surface of sendonce: `async throws` calls, `AsyncStream`s of states, and the
// generated value types (Transfer, TransferState, ComposerState, NetworkProfile, SendOnceError, ...)
// re-exported, so apps need only `import SendOnce`. Every decision is made in Rust; this layer only
// forwards calls and turns listener callbacks into streams.
@_exported import SendOnceFFI
import Foundation

/// The sendonce SDK: one per database file. It sends in the background on its own threads; a transfer
/// confirmed here is sent, with one idempotency key, until the server gives a definitive answer, across
/// restarts of the app.
///
/// ```swift
/// let sdk = try SendOnce(config: SendOnceConfig(baseUrl: "https://api.example.com", dbPath: path, accessToken: AccessToken(value: token)))
/// let transfer = try await sdk.sendTransfer(TransferRequest(toUserId: "usr_42", amountMinor: 50_000, currency: "BDT"))
/// let outcome = try await sdk.outcome(of: transfer.localId)
/// ```
///
/// Every call throws `SendOnceError`; after `close()` every call throws `SendOnceError.Closed`.
public final class SendOnce: @unchecked Sendable {
    /// Version of the Rust core these bindings were generated from.
    public static var version: String { sdkVersion() }

    private let core: SendOnceCore
    private let lock = NSLock()
    private var closed = false
    private var listenerId: UInt64 = 0
    private let list = Broadcast<[Transfer]>([])
    private var callbacks: [UUID: @Sendable (Transfer) throws -> Void] = [:]

    /// Opens the file, recovers every unfinished transfer and resumes sending.
    public convenience init(config: SendOnceConfig) throws {
        try self.init(core: SendOnceCore.open(config: config))
    }

    /// Opens the file with the app's token provider and HTTP stack (e.g. `URLSessionTransport`).
    public convenience init(config: SendOnceConfig, tokenProvider: AccessTokenProvider?, transport: HttpTransport?) throws {
        try self.init(core: SendOnceCore.openWith(config: config, tokenProvider: tokenProvider, transport: transport))
    }

    private init(core: SendOnceCore, sharedKey: String? = nil) throws {
        self.core = core
        self.sharedKey = sharedKey
        listenerId = try core.addListener(listener: TransferRelay(self))
        refresh()
    }

    private let sharedKey: String?
    nonisolated(unsafe) private static var instances: [String: SendOnce] = [:]
    private static let instancesLock = NSLock()

    /// The process's one instance on `config.dbPath`, for the UI, a BGTaskScheduler task and a push handler
    /// alike: the same object on every call (never `AlreadyOpen`) until it is closed. Another process holding
    /// the file (an app extension) throws `SendOnceError.Busy`: try again later. `tokenProvider` and
    /// `transport` are used by the call that opens it.
    public static func shared(
        _ config: SendOnceConfig, tokenProvider: AccessTokenProvider? = nil, transport: HttpTransport? = nil
    ) throws -> SendOnce {
        let key = URL(fileURLWithPath: config.dbPath).standardizedFileURL.resolvingSymlinksInPath().path
        instancesLock.lock()
        defer { instancesLock.unlock() }
        if let live = instances[key], !live.isClosed { return live }
        let core = try SendOnceCore.sharedWith(config: config, tokenProvider: tokenProvider, transport: transport)
        let sdk = try SendOnce(core: core, sharedKey: key)
        instances[key] = sdk
        return sdk
    }

    /// Wipes a file no instance has open; `Busy` if one has, `UnfinishedTransfers` unless `force`.
    public static func wipe(dbPath: String, force: Bool = false) throws -> WipeReport {
        try SendOnceFFI.wipe(dbPath: dbPath, force: force)
    }

    private var isClosed: Bool {
        lock.lock()
        defer { lock.unlock() }
        return closed
    }

    /// Sends and resolves everything due within `deadline`, then says what is left: what a
    /// `BGProcessingTask` handler turns into `setTaskCompleted(success:)` and its next request. Returns by the
    /// deadline even with a request out; nothing is lost, it goes on with the same key.
    public func drain(deadline: Duration) async throws -> DrainSummary {
        let ms = deadline.components.seconds * 1000 + deadline.components.attoseconds / 1_000_000_000_000_000
        let summary = try await core.drain(deadlineMs: ms)
        refresh()
        return summary
    }

    /// The app's lifecycle: in the background, network wake-ups are spread (see the README).
    public func setInForeground(_ foreground: Bool) throws {
        try core.setInForeground(foreground: foreground)
    }

    /// The account the store is bound to, if any.
    public func accountId() throws -> String? {
        try core.accountId()
    }

    /// Signs `accountId` in with `token`; another account than the bound one throws
    /// `SendOnceError.AccountMismatch` while it has unfinished transfers (with none, its history is wiped first).
    @discardableResult
    public func signIn(accountId: String, token: String?) throws -> WipeReport? {
        defer { refresh() }
        return try core.signIn(accountId: accountId, token: token)
    }

    /// Forgets the token and deletes every transfer and the account binding; throws
    /// `SendOnceError.UnfinishedTransfers` while any is unfinished, unless `force`.
    @discardableResult
    public func signOut(force: Bool = false) throws -> WipeReport {
        defer { refresh() }
        return try core.signOut(force: force)
    }

    /// Calls `body` with every event (attempts, answers, retries, outcomes, wipes), on an SDK thread. Events
    /// carry local ids only, never a recipient, note or token. Cancel the token to unregister.
    @discardableResult
    public func addEventListener(_ body: @escaping @Sendable (SdkEvent) -> Void) throws -> ListenerToken {
        let id = try core.addEventListener(listener: EventRelay(body))
        return ListenerToken { [weak self] in try? self?.core.removeListener(id: id) }
    }

    /// The SDK's log lines, from `level` up, to `sink` (os_log, a crash reporter); `nil` stops them. Only the
    /// SDK's own lines, none naming a recipient, note or token unless the config sets `logPersonalData`.
    public static func setLogSink(level: LogLevel, _ sink: (@Sendable (LogRecord) -> Void)?) throws {
        try SendOnceFFI.setLogSink(sink: sink.map { LogRelay($0) }, level: level)
    }

    /// Opens the file, recovers every unfinished transfer and resumes sending.
    public static func open(_ config: SendOnceConfig) throws -> SendOnce {
        try SendOnce(config: config)
    }

    deinit {
        close()
    }

    /// The user confirmed: mints the key, commits the transfer durably and returns it; sending starts at once.
    public func sendTransfer(_ request: TransferRequest) async throws -> Transfer {
        try await core.sendTransfer(request: request)
    }

    /// Shorthand of `sendTransfer(_:)` with the request's fields.
    public func sendTransfer(to toUserId: String, amountMinor: Int64, currency: String, note: String? = nil) async throws -> Transfer {
        try await sendTransfer(TransferRequest(toUserId: toUserId, amountMinor: amountMinor, currency: currency, note: note))
    }

    /// One transfer by local id.
    public func transfer(_ localId: String) throws -> Transfer {
        try core.transfer(localId: localId)
    }

    /// Every transfer, newest first.
    public func transfers() throws -> [Transfer] {
        try core.transfers()
    }

    /// Transfers not yet final, newest first.
    public func unfinishedTransfers() throws -> [Transfer] {
        try core.unfinishedTransfers()
    }

    /// Waits until the transfer is settled (final, or handed to the user as NeedsAttention).
    public func outcome(of localId: String) async throws -> Transfer {
        try await core.waitForOutcome(localId: localId)
    }

    /// Resolves a NeedsAttention transfer now through the status look-up by key (never a new key).
    public func resolve(_ localId: String) async throws -> Transfer {
        try await core.resolve(localId: localId)
    }

    /// The list of transfers (newest first): the current one at once, then after every change.
    /// The stream ends when the SDK is closed or the consumer stops iterating.
    public func transferUpdates() -> AsyncStream<[Transfer]> {
        list.stream(.bufferingNewest(1))
    }

    /// The states of one transfer: the current one at once, then every change, until it is settled.
    public func updates(of localId: String) -> AsyncStream<Transfer> {
        let lists = transferUpdates()
        return AsyncStream { continuation in
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

    /// Calls `body` at every change of any transfer, on an SDK thread. Whatever it throws is ignored.
    /// Keep the token: cancelling it (or dropping the SDK) unregisters.
    @discardableResult
    public func addListener(_ body: @escaping @Sendable (Transfer) throws -> Void) -> ListenerToken {
        let id = UUID()
        lock.lock()
        callbacks[id] = body
        lock.unlock()
        return ListenerToken { [weak self] in
            guard let self else { return }
            self.lock.lock()
            self.callbacks[id] = nil
            self.lock.unlock()
        }
    }

    /// The host app's connectivity signal; `true` wakes every waiting retry at once.
    public func setNetworkAvailable(_ available: Bool) throws {
        try core.setNetworkAvailable(available: available)
    }

    /// Replaces the bearer token (nil to forget it); transfers waiting for credentials resume.
    public func setAccessToken(_ token: String?) throws {
        try core.setAccessToken(token: token)
    }

    /// Train mode: switches the network simulator at run time; `seed` makes the faults reproducible.
    public func setNetworkProfile(_ profile: NetworkProfile, seed: UInt64 = 0) throws {
        try core.setNetworkProfile(profile: profile, seed: seed)
    }

    /// The network profile in force.
    public func networkProfile() throws -> NetworkProfile {
        try core.networkProfile()
    }

    /// What the network simulator did so far.
    public func networkStats() throws -> NetsimStats {
        try core.networkStats()
    }

    /// A composer for one confirm screen.
    public func composer() throws -> Composer {
        try Composer(core: core.composer())
    }

    /// A composer re-attached to a transfer confirmed earlier (after the app was killed).
    public func composer(for localId: String) throws -> Composer {
        try Composer(core: core.composerFor(localId: localId))
    }

    /// Stops sending and releases the file. Nothing is lost: a request cut off here is sent again, with the
    /// same key, on the next open. Safe to call twice; ends every stream.
    public func close() {
        lock.lock()
        if closed {
            lock.unlock()
            return
        }
        closed = true
        callbacks.removeAll()
        if let key = sharedKey {
            Self.instancesLock.lock()
            if Self.instances[key] === self { Self.instances[key] = nil }
            Self.instancesLock.unlock()
        }
        let id = listenerId
        lock.unlock()
        try? core.removeListener(id: id)
        try? core.shutdown()
        list.finish()
    }

    fileprivate func changed(_ transfer: Transfer) {
        refresh()
        lock.lock()
        let bodies = Array(callbacks.values)
        lock.unlock()
        for body in bodies {
            // A listener's failure is its own; the SDK carries on.
            try? body(transfer)
        }
    }

    /// Re-reads the list from the SDK (the one source of truth) and hands it to every stream, in order.
    private func refresh() {
        list.publish { _ in try? core.transfers() }
    }
}

/// Unregisters a listener when cancelled.
public final class ListenerToken: @unchecked Sendable {
    private let onCancel: () -> Void
    private var cancelled = false
    private let lock = NSLock()

    init(_ onCancel: @escaping () -> Void) {
        self.onCancel = onCancel
    }

    /// Stops the listener; safe to call twice.
    public func cancel() {
        lock.lock()
        let first = !cancelled
        cancelled = true
        lock.unlock()
        if first { onCancel() }
    }
}

/// Holds the SDK weakly: the native side keeps the listener alive, it must not keep the SDK alive.
private final class TransferRelay: TransferListener, @unchecked Sendable {
    weak var owner: SendOnce?

    init(_ owner: SendOnce) {
        self.owner = owner
    }

    func onTransferChanged(transfer: Transfer) throws {
        owner?.changed(transfer)
    }
}

private final class EventRelay: EventListener, @unchecked Sendable {
    let body: @Sendable (SdkEvent) -> Void
    init(_ body: @escaping @Sendable (SdkEvent) -> Void) { self.body = body }
    func onEvent(event: SdkEvent) throws { body(event) }
}

private final class LogRelay: LogSink, @unchecked Sendable {
    let body: @Sendable (LogRecord) -> Void
    init(_ body: @escaping @Sendable (LogRecord) -> Void) { self.body = body }
    func log(record: LogRecord) throws { body(record) }
}

public extension TransferState {
    /// True once the outcome is known and nothing more will happen.
    var isFinal: Bool { transferStateIsFinal(state: self) }

    /// True once a UI should stop showing progress (final, or handed to the user).
    var isSettled: Bool { transferStateIsSettled(state: self) }
}

public extension ComposerState {
    /// Whether the Send button is enabled in this state.
    var sendEnabled: Bool { composerStateSendEnabled(state: self) }

    /// The transfer this state is about, if any.
    var currentTransfer: Transfer? {
        switch self {
        case .editing: return nil
        case let .submitting(transfer): return transfer
        case let .waiting(transfer, _): return transfer
        case let .done(receipt): return receipt
        case let .rejected(_, transfer): return transfer
        case let .needsAttention(transfer): return transfer
        }
    }
}
