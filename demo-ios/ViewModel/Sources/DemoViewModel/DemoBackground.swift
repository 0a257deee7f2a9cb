import Foundation
import SendOnce

/// Background sending for the demo: the same shared SDK the screen uses, drained by a BGProcessingTask
/// (`App/Sources/BackgroundSend.swift`) while no screen is open. Plain Swift, so it is tested on Linux.
public enum DemoBackground {
    /// Where the demo keeps its signed-up accounts (read by the view model too).
    public static let accountFile = "demo-account.json"

    /// The SDK config of `account`: one database file per demo user, in `directory`.
    public static func config(directory: URL, account: DemoAccount, options: DemoOptions = DemoOptions()) throws -> SendOnceConfig {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let safe = String(account.userId.map { $0.isLetter || $0.isNumber || $0 == "_" || $0 == "-" ? $0 : "_" })
        return SendOnceConfig(
            baseUrl: account.serverUrl, dbPath: directory.appendingPathComponent("sendonce-\(safe).db").path,
            accessToken: AccessToken(value: account.token), retry: options.retry,
            requestTimeoutMs: options.requestTimeoutMs, clockSpeed: options.clockSpeed, accountId: account.userId
        )
    }

    /// Sends what is due within `deadline` on the shared instance; `nil` when nobody signed up here.
    /// Throws `SendOnceError.Busy` when another process (an app extension) holds the file.
    public static func drain(directory: URL, deadline: Duration, options: DemoOptions = DemoOptions()) async throws -> DrainSummary? {
        let store = AccountStore(file: directory.appendingPathComponent(accountFile))
        guard let account = store.account(serverUrl: store.serverUrl ?? options.defaultServerUrl) else { return nil }
        return try await SendOnce.shared(config(directory: directory, account: account, options: options)).drain(deadline: deadline)
    }
}
