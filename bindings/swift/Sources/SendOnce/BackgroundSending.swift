// When an iOS app must ask for background time, decided once here and tested on Linux; the app's adapters
// (BGTaskScheduler and UIApplication, a few lines each, bindings/README.md) only carry it out.
import Foundation
import SendOnceFFI

/// The app's `BGTaskScheduler`, as `BackgroundSending` uses it: submit a `BGAppRefreshTaskRequest`.
public protocol RefreshScheduling: Sendable {
    /// Submits a refresh request for `identifier` that iOS may start from `earliestBegin` on.
    func submitRefresh(identifier: String, earliestBegin: Date) throws
}

/// `UIApplication`'s extra time after the app leaves the foreground (`beginBackgroundTask`).
public protocol BackgroundTimeGranting: Sendable {
    /// Begins extra time; iOS calls `expiration` when it takes the time back. Returns the task's token.
    func beginTask(name: String, expiration: @escaping @Sendable () -> Void) -> Int
    /// Ends the extra time of `token` (once; iOS ends an app that keeps it past expiration).
    func endTask(_ token: Int)
}

/// Background sending for iOS, the decisions only: a transfer confirmed and then left (the app swiped to
/// the background, the screen locked) is sent in the extra time iOS grants at once, and what is left by
/// `BGAppRefreshTask` runs, not at the next launch. (A `BGProcessingTask` runs only when the device is idle
/// and charging: too late for a payment.)
///
/// - `attach(to:)` follows the SDK's transfers: at start with anything unfinished, and at every newly
///   confirmed transfer, it submits a refresh request;
/// - `appDidEnterBackground(_:)` (scene phase `.background`): with sends unfinished, asks for extra time,
///   drains in it until done or until iOS takes the time back, ends it, and submits a refresh for the rest;
/// - `handleRefresh(_:)` is the `BGAppRefreshTask` handler: drains, submits the next refresh.
public final class BackgroundSending: Sendable {
    /// The refresh task's identifier (in Info.plist's `BGTaskSchedulerPermittedIdentifiers`).
    public let identifier: String
    private let scheduler: any RefreshScheduling
    private let time: any BackgroundTimeGranting

    public init(scheduler: any RefreshScheduling, time: any BackgroundTimeGranting, identifier: String = "io.sendonce.refresh") {
        self.scheduler = scheduler
        self.time = time
        self.identifier = identifier
    }

    /// Follows `sdk`'s transfers (call at launch); cancel the task to stop (closing the SDK ends it too).
    @discardableResult
    public func attach(to sdk: some SendOnceClient) -> Task<Void, Never> {
        let lists = sdk.transfers
        return Task { [self] in
            var seen = Set<String>()
            var first = true
            for await list in lists {
                let fresh = list.filter { $0.state.waitsForSending && !seen.contains($0.localId) }
                seen.formUnion(list.map(\.localId))
                if (first && list.contains { $0.state.waitsForSending }) || (!first && !fresh.isEmpty) {
                    submit(after: 0)
                }
                first = false
            }
        }
    }

    /// The app left the foreground: sends what is unfinished in the extra time iOS grants (up to `deadline`
    /// seconds), ends that time before iOS takes it back, and submits a refresh for what is left. Returns the
    /// drain's summary, nil when nothing was unfinished (no time asked for) or iOS took the time back first.
    @discardableResult
    public func appDidEnterBackground(_ sdk: some SendOnceClient, deadline: TimeInterval = 25) async -> DrainSummary? {
        guard let unfinished = try? await sdk.unfinishedTransfers(), unfinished.contains(where: { $0.state.waitsForSending }) else {
            return nil
        }
        let drain = Task { try await sdk.drain(deadline: deadline) }
        let grant = Grant(time)
        // iOS takes the time back: stop the request (it stays durable, same key) and end the time at once.
        grant.started(time.beginTask(name: "sendonce-send") {
            drain.cancel()
            grant.end()
        })
        let summary = try? await drain.value
        grant.end()
        submit(after: summary.map(nextRun) ?? 0)
        return summary
    }

    /// The `BGAppRefreshTask` handler: drains within `deadline` seconds, submits the next refresh while
    /// something is due, and returns what `setTaskCompleted(success:)` takes. Cancel its task from the
    /// task's `expirationHandler`.
    public func handleRefresh(_ sdk: some SendOnceClient, deadline: TimeInterval = 25) async -> Bool {
        guard let summary = try? await sdk.drain(deadline: deadline) else {
            submit(after: 0)
            return false
        }
        if summary.unfinished.contains(where: { $0.state.waitsForSending }) {
            submit(after: nextRun(summary))
        }
        return true
    }

    private func nextRun(_ summary: DrainSummary) -> TimeInterval? {
        summary.unfinished.contains(where: { $0.state.waitsForSending }) ? (summary.nextAttemptIn ?? 0) : nil
    }

    private func submit(after: TimeInterval?) {
        guard let after else { return }
        try? scheduler.submitRefresh(identifier: identifier, earliestBegin: Date(timeIntervalSinceNow: after))
    }
}

/// One grant of extra time, ended exactly once: by the drain's end or by iOS's expiration, whichever comes
/// first — also when iOS expires it before `beginTask` has returned its token.
private final class Grant: @unchecked Sendable {
    private let time: any BackgroundTimeGranting
    private let lock = NSLock()
    private var token: Int?
    private var ending = false
    private var ended = false

    init(_ time: any BackgroundTimeGranting) { self.time = time }

    func started(_ token: Int) {
        lock.lock()
        self.token = token
        let endNow = ending && !ended
        if endNow { ended = true }
        lock.unlock()
        if endNow { time.endTask(token) }
    }

    func end() {
        lock.lock()
        ending = true
        let token = ended ? nil : self.token
        if token != nil { ended = true }
        lock.unlock()
        if let token { time.endTask(token) }
    }
}

extension TransferState {
    /// A state in which the SDK will send again by itself: what background time is for.
    var waitsForSending: Bool { self == .pending || self == .sending || self == .retrying }
}
