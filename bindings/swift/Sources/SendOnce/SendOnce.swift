// The idiomatic Swift surface of sendonce: `async throws` calls, `AsyncStream`s of states, and the
// generated value types (Transfer, TransferState, ComposerState, NetworkProfile, SendOnceError, ...)
// re-exported, so apps need only `import SendOnce`. Every decision is made in Rust; this layer only
// forwards calls, keeps disk work off the caller's thread and turns listener callbacks into streams.
@_exported import SendOnceFFI
// The raw core (SendOnceCore, ComposerCore) is SPI of the generated module: this layer may name it, apps
// may not without saying so (scripts/mark-raw-core).
@_spi(SendOnceInternal) import SendOnceFFI
import Foundation

/// The sendonce SDK: one per database file. It sends in the background on its own threads; a transfer
/// confirmed here is sent, with one idempotency key, until the server gives a definitive answer, across
/// restarts of the app.
///
/// ```swift
/// let sdk = try await SendOnce.open(SendOnceConfig(baseUrl: "https://api.example.com", dbPath: path, accessToken: AccessToken(value: token)))
/// let transfer = try await sdk.sendTransfer(TransferRequest(toUserId: "usr_42", amountMinor: 50_000, currency: "BDT"))
/// let outcome = try await sdk.outcome(of: transfer.localId)
/// sdk.close()
/// ```
///
/// Safe from the MainActor: every call that touches the disk or the network is `async` and runs on the
/// SDK's own queue or threads; every async call honours Task cancellation. Amounts are `Int64` minor units
/// of the currency (paisa for BDT: `50_000` is 500.00 BDT), from 1 to `SendOnce.maxAmountMinor`. Every call
/// throws `SendOnceError`; after `close()` every call throws `SendOnceError.Closed` and every stream ends.
public final class SendOnce: Sendable {
    /// Version of the Rust core these bindings were generated from.
    public static var version: String { sdkVersion() }

    /// Largest amount of one transfer, in minor units of its currency.
    public static var maxAmountMinor: Int64 { SendOnceFFI.maxAmountMinor() }

    private struct State {
        var closed = false
        var listenerId: UInt64 = 0
        var loaded = false
        var early: [Transfer] = []
        var callbacks: [UUID: @Sendable (Transfer) throws -> Void] = [:]
        var composers: [WeakComposer] = []
    }

    private let core: SendOnceCore
    private let state = Locked(State())
    private let list = Broadcast<[Transfer]>([])
    /// Mirrors the core's network profile; only `setNetworkProfile` changes it.
    private let profile = Broadcast<NetworkProfile>(.off)

    private let sharedKey: String?
    private let openedWith: SharedSettings?
    /// Shared instances by file, with their claims not yet released by `close()`.
    private static let instances = Locked<[String: (sdk: SendOnce, holders: Int)]>([:])

    /// The platform's HTTP stack, one per process: what `open` and `shared` use when the app passes no
    /// transport and the native core has no HTTP stack of its own (the iOS build), so the device's trust
    /// settings and proxies apply.
    private static let platformTransport = URLSessionTransport()

    /// The transport to open with: the app's, else the platform's when the core has none built in.
    static func effectiveTransport(
        _ given: HttpTransport?, builtIn: Bool = SendOnceFFI.hasBuiltInTransport()
    ) -> HttpTransport? {
        given ?? (builtIn ? nil : platformTransport)
    }

    private init(core: SendOnceCore, sharedKey: String? = nil, openedWith: SharedSettings? = nil) {
        self.core = core
        self.sharedKey = sharedKey
        self.openedWith = openedWith
    }

    /// Opens the file (off the caller's thread), recovers every unfinished transfer and resumes sending.
    public static func open(_ config: SendOnceConfig) async throws -> SendOnce {
        try config.checkSpans()
        return try await offCallerThread {
            let core = try effectiveTransport(nil).map {
                try SendOnceCore.openWith(config: config, tokenProvider: nil, transport: $0)
            } ?? SendOnceCore.open(config: config)
            let sdk = SendOnce(core: core)
            try sdk.start()
            return sdk
        }
    }

    /// Opens the file (off the caller's thread) with the app's token provider and HTTP stack (e.g.
    /// `URLSessionTransport`).
    public static func open(
        _ config: SendOnceConfig, tokenProvider: AccessTokenProvider?, transport: HttpTransport?
    ) async throws -> SendOnce {
        try config.checkSpans()
        let transport = effectiveTransport(transport)
        return try await offCallerThread {
            let core = try SendOnceCore.openWith(config: config, tokenProvider: tokenProvider, transport: transport)
            let sdk = SendOnce(core: core)
            try sdk.start()
            return sdk
        }
    }

    /// The process's one instance on `config.dbPath`, for the UI, a BGTaskScheduler task and a push handler
    /// alike: the same object on every call (never `AlreadyOpen`). Each call is one claim, released by one
    /// `close()`: the instance closes when every caller has closed it, so the UI leaving never stops a
    /// background send. Another process holding the file (an app extension) throws `SendOnceError.Busy`.
    ///
    /// Every call must configure it the same way: another base URL or setting, or another `tokenProvider` or
    /// `transport` object, throws `SendOnceError.InvalidConfig` instead of being silently dropped (configure
    /// it once, at application start). Not compared: the access token and the starting network profile.
    public static func shared(
        _ config: SendOnceConfig, tokenProvider: AccessTokenProvider? = nil, transport: HttpTransport? = nil
    ) async throws -> SendOnce {
        try config.checkSpans()
        let transport = effectiveTransport(transport)
        return try await offCallerThread {
            let key = URL(fileURLWithPath: config.dbPath).standardizedFileURL.resolvingSymlinksInPath().path
            let wanted = SharedSettings(config, tokenProvider: tokenProvider, transport: transport)
            return try SendOnce.instances.withLock { instances in
                if let live = instances[key], !live.sdk.isClosed {
                    let differ = live.sdk.openedWith?.differences(wanted) ?? []
                    guard differ.isEmpty else {
                        throw SendOnceError.InvalidConfig(detail: """
                            the shared instance on this file was opened with another \(differ.joined(separator: ", ")); \
                            configure it once, at application start, and pass the same configuration and objects everywhere
                            """)
                    }
                    instances[key]?.holders += 1
                    return live.sdk
                }
                let core = try SendOnceCore.sharedWith(config: config, tokenProvider: tokenProvider, transport: transport)
                let sdk = SendOnce(core: core, sharedKey: key, openedWith: wanted)
                try sdk.start()
                instances[key] = (sdk, 1)
                return sdk
            }
        }
    }

    /// Wipes (off the caller's thread) a file no instance has open; `Busy` if one has, `UnfinishedTransfers`
    /// unless `force`.
    public static func wipe(dbPath: String, force: Bool = false) async throws -> WipeReport {
        try await offCallerThread { try SendOnceFFI.wipe(dbPath: dbPath, force: force) }
    }

    /// The SDK's log lines, from `level` up, to `sink` (os_log, a crash reporter); `nil` stops them. Only the
    /// SDK's own lines, none naming a recipient, note or token unless the config sets `logPersonalData`.
    public static func setLogSink(level: LogLevel, _ sink: (@Sendable (LogRecord) -> Void)?) throws {
        try SendOnceFFI.setLogSink(sink: sink.map { LogRelay($0) }, level: level)
    }

    private var isClosed: Bool { state.withLock { $0.closed } }

    deinit {
        closeNow()
    }

    /// Registers with Rust first, then reads, so no change falls between the read and the listener.
    private func start() throws {
        let id = try core.addListener(listener: TransferRelay(self))
        state.withLock { $0.listenerId = id }
        let inForce = try core.networkProfile()
        profile.publish { _ in inForce }
        let first = try core.transfers()
        list.publish { _ in
            let early = state.withLock { s in
                s.loaded = true
                defer { s.early = [] }
                return s.early
            }
            // A change delivered while the read ran may be older than what the read saw: keep the newer.
            return early.reduce(first) { list, t in
                guard let seen = list.first(where: { $0.localId == t.localId }), t.updatedAt < seen.updatedAt else {
                    return merged(list, t)
                }
                return list
            }
        }
    }

    /// The user confirmed: mints the key, commits the transfer durably and returns it; sending starts at once.
    public func sendTransfer(_ request: TransferRequest) async throws -> Transfer {
        let core = try live()
        // Committed on the SDK's I/O queue, which may block: no hop to the store thread and back.
        return try await cancellable { _ in try await offCallerThread { try core.sendTransferBlocking(request: request) } }
    }

    /// The user confirmed an operation of the app's own API (an `OperationRequest` value): the key is minted
    /// and method, path, headers and exact body are committed before the first byte; every attempt sends them.
    public func sendOperation(_ operation: OperationRequest) async throws -> Transfer {
        let core = try live()
        return try await cancellable { _ in try await offCallerThread { try core.sendOperationBlocking(operation: operation) } }
    }

    /// The customer completed the step the server asked for (`.requiresAction`): sent again, same key and bytes.
    public func actionCompleted(_ localId: String) async throws -> Transfer {
        try await io { try $0.actionCompleted(localId: localId) }
    }

    /// One transfer by local id.
    public func transfer(_ localId: String) async throws -> Transfer {
        try await io { try $0.transfer(localId: localId) }
    }

    /// One page of the history, newest first: up to `limit` (at most 500) transfers after the one with local
    /// id `after` (the last of the previous page; nil for the first). Pages never repeat or skip a transfer
    /// while new ones are added; `.NotFound` if `after` was pruned meanwhile.
    /// `limit` is an `Int` like every count of a Swift API (as Kotlin's); a negative one reads as 0.
    public func transfers(after: String?, limit: Int) async throws -> [Transfer] {
        let limit = UInt32(clamping: max(limit, 0))
        return try await io { try $0.transfersPage(after: after, limit: limit) }
    }

    /// Transfers not yet final, newest first.
    public func unfinishedTransfers() async throws -> [Transfer] {
        try await io { try $0.unfinishedTransfers() }
    }

    /// Waits until the transfer is settled (final, or handed to the user as NeedsAttention); throws
    /// `CancellationError` as soon as the calling task is cancelled.
    public func outcome(of localId: String) async throws -> Transfer {
        let core = try live()
        return try await cancellable { try await core.waitForOutcome(localId: localId, cancel: $0) }
    }

    /// Resolves a NeedsAttention transfer now through the status look-up by key (never a new key).
    public func resolve(_ localId: String) async throws -> Transfer {
        let core = try live()
        return try await cancellable { try await core.resolve(localId: localId, cancel: $0) }
    }

    /// The list of transfers (newest first): the current one at once, then after every change, built from
    /// the changed transfer each listener call delivers. Ends when the SDK closes or the consumer stops.
    /// (Kotlin's `transfers` flow; each access is a new stream.)
    public var transfers: AsyncStream<[Transfer]> {
        list.stream(.bufferingNewest(1))
    }

    /// The list stream under its old name, which Kotlin gives the stream of one transfer.
    @available(*, deprecated, renamed: "transfers")
    public func transferUpdates() -> AsyncStream<[Transfer]> { transfers }

    /// The latest list `transfers` delivered (no I/O).
    public var currentTransfers: [Transfer] { list.value }

    /// The states of one transfer: the current one at once, then every change, until it is settled or the
    /// SDK closes. (Kotlin's `transferUpdates(localId)`.)
    public func transferUpdates(of localId: String) -> AsyncStream<Transfer> {
        transferStates(of: localId, in: transfers)
    }

    /// The stream of one transfer under its old name.
    @available(*, deprecated, renamed: "transferUpdates(of:)")
    public func updates(of localId: String) -> AsyncStream<Transfer> { transferUpdates(of: localId) }

    /// Calls `body` with the changed transfer at every change of any transfer, on an SDK thread. Whatever it
    /// throws is ignored. Keep the token: cancelling or releasing it (or closing the SDK) unregisters.
    public func addListener(_ body: @escaping @Sendable (Transfer) throws -> Void) -> ListenerToken {
        let id = UUID()
        state.withLock { $0.callbacks[id] = body }
        return ListenerToken { [weak self] in
            _ = self?.state.withLock { $0.callbacks.removeValue(forKey: id) }
        }
    }

    /// The host app's connectivity signal; `true` wakes every waiting retry at once.
    public func setNetworkAvailable(_ available: Bool) async throws {
        try await io { try $0.setNetworkAvailable(available: available) }
    }

    /// Replaces the bearer token (nil to forget it); transfers waiting for credentials resume.
    public func setAccessToken(_ token: String?) async throws {
        try await io { try $0.setAccessToken(token: token) }
    }

    /// Train mode: switches the network simulator at run time; `seed` makes the faults reproducible.
    public func setNetworkProfile(_ profile: NetworkProfile, seed: UInt64 = 0) async throws {
        try profile.checkSpans()
        try await io { core in
            try core.setNetworkProfile(profile: profile, seed: seed)
            // Read back under the broadcast's delivery lock: after concurrent calls, the last value
            // published is the core's last.
            self.profile.publish { _ in try? core.networkProfile() }
        }
    }

    /// The network profile in force, read from the Rust core (off the caller's thread). A screen reads
    /// `currentNetworkProfile` or iterates `networkProfileUpdates()` instead: no call into Rust.
    public func networkProfile() async throws -> NetworkProfile {
        try await io { try $0.networkProfile() }
    }

    /// The network profile in force at once, then every change; only `setNetworkProfile` changes it, so the
    /// value crosses the FFI once per change. A consumer slower than the changes gets the newest one (a
    /// screen shows the state, not its history). Ends when the SDK closes or the consumer stops.
    public func networkProfileUpdates() -> AsyncStream<NetworkProfile> {
        profile.stream(.bufferingNewest(1))
    }

    /// The profile `networkProfileUpdates()` shows now (memory: no I/O, no call into Rust).
    public var currentNetworkProfile: NetworkProfile { profile.value }

    /// What the network simulator did so far.
    public func networkStats() async throws -> NetsimStats {
        try await io { try $0.networkStats() }
    }

    /// Sends and resolves everything due within `deadline` (seconds), then says what is left: what a
    /// `BGAppRefreshTask` handler (`BackgroundSending.handleRefresh`) turns into `setTaskCompleted(success:)`
    /// and its next request. Returns by the
    /// deadline even with a request out; nothing is lost, it goes on with the same key.
    public func drain(deadline: TimeInterval) async throws -> DrainSummary {
        try checkSpan("deadline", deadline)
        let core = try live()
        let summary = try await cancellable { try await core.drain(deadline: deadline, cancel: $0) }
        try await reload()
        return summary
    }

    /// `drain(deadline:)` with a Swift `Duration` (a type of iOS 16 / macOS 13; on iOS 15 pass seconds).
    @available(iOS 16, macOS 13, tvOS 16, watchOS 9, *)
    public func drain(deadline: Duration) async throws -> DrainSummary {
        let (seconds, attoseconds) = deadline.components
        return try await drain(deadline: TimeInterval(seconds) + TimeInterval(attoseconds) / 1e18)
    }

    /// The app's lifecycle: in the background, network wake-ups are spread (see the README). A flag, no I/O.
    public func setInForeground(_ foreground: Bool) throws {
        try live().setInForeground(foreground: foreground)
    }

    /// The account the store is bound to, if any.
    public func accountId() async throws -> String? {
        try await io { try $0.accountId() }
    }

    /// Signs `accountId` in with `token`; another account than the bound one throws
    /// `SendOnceError.AccountMismatch` while it has unfinished transfers (with none, its history is wiped first).
    @discardableResult
    public func signIn(accountId: String, token: String?) async throws -> WipeReport? {
        let report = try await io { try $0.signIn(accountId: accountId, token: token) }
        try await reload()
        return report
    }

    /// Forgets the token and deletes every transfer and the account binding; throws
    /// `SendOnceError.UnfinishedTransfers` while any is unfinished, unless `force`.
    @discardableResult
    public func signOut(force: Bool = false) async throws -> WipeReport {
        let report = try await io { try $0.signOut(force: force) }
        try await reload()
        return report
    }

    /// Calls `body` with every event (attempts, answers, retries, outcomes, wipes), on an SDK thread. Events
    /// carry local ids only, never a recipient, note or token. Keep the token: cancelling or releasing it (or
    /// closing the SDK) unregisters.
    public func addEventListener(_ body: @escaping @Sendable (SdkEvent) -> Void) throws -> ListenerToken {
        let core = try live()
        let id = try core.addEventListener(listener: EventRelay(body))
        return ListenerToken { [weak self] in
            guard let self, !self.isClosed else { return }
            try? self.core.removeListener(id: id)
        }
    }

    /// Re-reads the list after a call that may delete rows (a wipe), which no change delivers.
    private func reload() async throws {
        let fresh = try await io { try $0.transfers() }
        if !isClosed { list.publish { _ in fresh } }
    }

    /// A composer for one confirm screen; closed with the SDK at the latest.
    public func composer() async throws -> Composer {
        try track(await io { try Composer(core: $0.composer()) })
    }

    /// The composer of a transfer confirmed earlier, e.g. by a scene the system discarded: keep its local id
    /// in `@SceneStorage` and re-attach here. The SDK decides what it shows (Send stays off unless the
    /// transfer is final) and it reaches the receipt like the original screen would.
    public func composer(for localId: String) async throws -> Composer {
        try track(await io { try Composer(core: $0.composerFor(localId: localId)) })
    }

    /// The composer for a confirm screen the system may have discarded: pass the local id the scene saved in
    /// `@SceneStorage` (nil if none). The SDK decides: that transfer, finished or not (so a receipt survives
    /// process death); else the newest unfinished transfer; else a fresh composer.
    public func restoreComposer(savedLocalId: String?) async throws -> Composer {
        try track(await io { try Composer(core: $0.restoreComposer(savedLocalId: savedLocalId)) })
    }

    /// Stops sending and releases the file. Nothing is lost: a request cut off here is sent again, with the
    /// same key, on the next open. Safe to call twice; ends every stream, of the SDK and of its composers.
    /// No store transaction runs here: the SDK aborts its tasks and drops the file lock. On an instance from
    /// `shared` it releases this caller's claim only (see `shared`).
    public func close() {
        if let key = sharedKey {
            // One holder lets go; the last one closes it (under the lock, so shared() never returns it closing).
            let last = Self.instances.withLock { instances -> Bool in
                guard let entry = instances[key], entry.sdk === self else { return true }
                if entry.holders > 1 {
                    instances[key]?.holders -= 1
                    return false
                }
                instances[key] = nil
                return true
            }
            if !last { return }
        }
        closeNow()
    }

    private func closeNow() {
        let taken: (UInt64, [WeakComposer])? = state.withLock { s in
            if s.closed { return nil }
            s.closed = true
            s.callbacks.removeAll()
            defer { s.composers = [] }
            return (s.listenerId, s.composers)
        }
        guard let (id, composers) = taken else { return }
        for composer in composers {
            composer.value?.close()
        }
        try? core.removeListener(id: id)
        try? core.shutdown()
        list.finish()
        profile.finish()
    }

    private func live() throws -> SendOnceCore {
        if state.withLock({ $0.closed }) { throw SendOnceError.Closed }
        return core
    }

    /// A synchronous FFI call that may touch the disk, run off the caller's thread.
    private func io<T: Sendable>(_ body: @escaping @Sendable (SendOnceCore) throws -> T) async throws -> T {
        let core = try live()
        return try await offCallerThread { try body(core) }
    }

    private func track(_ composer: Composer) -> Composer {
        state.withLock { s in
            s.composers.removeAll { $0.value == nil }
            s.composers.append(WeakComposer(value: composer))
        }
        return composer
    }

    fileprivate func changed(_ transfer: Transfer) {
        let (deliver, bodies) = state.withLock { s -> (Bool, [@Sendable (Transfer) throws -> Void]) in
            if s.closed { return (false, []) }
            if !s.loaded {
                s.early.append(transfer)
                return (false, [])
            }
            return (true, Array(s.callbacks.values))
        }
        guard deliver else { return }
        // Listeners first: once a stream shows a change, every listener has been told of it.
        for body in bodies {
            // A listener's failure is its own; the SDK carries on.
            try? body(transfer)
        }
        list.publish { merged($0, transfer) }
    }
}

/// `list` with `t` in place of its older state, or inserted where the newest-first order puts it.
func merged(_ list: [Transfer], _ t: Transfer) -> [Transfer] {
    var out = list
    if let at = out.firstIndex(where: { $0.localId == t.localId }) {
        out[at] = t
        return out
    }
    let newer = { (a: Transfer, b: Transfer) in a.createdAt != b.createdAt ? a.createdAt > b.createdAt : a.localId > b.localId }
    out.insert(t, at: out.firstIndex(where: { newer(t, $0) }) ?? out.count)
    return out
}

/// A weak reference; kept inside a `Locked`, which makes it safe to share.
struct Weak<Object: AnyObject> {
    weak var value: Object?
}

private typealias WeakComposer = Weak<Composer>

/// Unregisters a listener when cancelled or released.
public final class ListenerToken: Sendable {
    private let onCancel: Locked<(@Sendable () -> Void)?>

    init(_ onCancel: @escaping @Sendable () -> Void) {
        self.onCancel = Locked(onCancel)
    }

    deinit {
        cancel()
    }

    /// Stops the listener; safe to call twice.
    public func cancel() {
        onCancel.take()?()
    }
}

/// Holds the SDK weakly: the native side keeps the listener alive, it must not keep the SDK alive.
private final class TransferRelay: TransferListener {
    private let owner: Locked<Weak<SendOnce>>

    init(_ owner: SendOnce) {
        self.owner = Locked(Weak(value: owner))
    }

    func onTransferChanged(transfer: Transfer) throws {
        owner.withLock { $0.value }?.changed(transfer)
    }
}

private final class EventRelay: EventListener {
    let body: @Sendable (SdkEvent) -> Void
    init(_ body: @escaping @Sendable (SdkEvent) -> Void) { self.body = body }
    func onEvent(event: SdkEvent) throws { body(event) }
}

private final class LogRelay: LogSink {
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
        case let .requiresAction(transfer, _): return transfer
        }
    }
}
