import Foundation
import SendOnce

/// Background sending for the demo: the same shared SDK the screen uses, handed to the bindings'
/// `BackgroundSending` by `App/Sources/BackgroundSend.swift`. Plain Swift, so it is tested on Linux.
public enum DemoBackground {
    /// Where the demo keeps its signed-up accounts (read by the view model too).
    public static let accountFile = "demo-account.json"

    /// The SDK config of `account`: one database file per demo user, in `databaseDirectory`.
    public static func config(databaseDirectory: URL, account: DemoAccount, options: DemoOptions = DemoOptions()) -> SendOnceConfig {
        let safe = String(account.userId.map { $0.isLetter || $0.isNumber || $0 == "_" || $0 == "-" ? $0 : "_" })
        return SendOnceConfig(
            baseUrl: account.serverUrl, dbPath: databaseDirectory.appendingPathComponent("sendonce-\(safe).db").path,
            accessToken: AccessToken(value: account.token), retry: options.retry,
            requestTimeout: options.requestTimeout, clockSpeed: options.clockSpeed, accountId: account.userId
        )
    }

    /// The process's shared SDK of `account`, its directory prepared off the caller's thread.
    static func sharedSdk(databaseDirectory: URL, account: DemoAccount, options: DemoOptions) async throws -> SendOnce {
        try await Task.detached { try DatabaseLocation.prepare(databaseDirectory) }.value
        return try await SendOnce.shared(config(databaseDirectory: databaseDirectory, account: account, options: options))
    }

    /// The process's shared SDK of the account signed up here (the one the screen uses, if it is open); `nil`
    /// when nobody signed up (nothing to send). `directory` holds the account, `databaseDirectory` the
    /// database (as for `DemoViewModel`). Throws `SendOnceError.Busy` when another process (an app
    /// extension) holds the file.
    public static func sharedSdk(
        directory: URL, databaseDirectory: URL? = nil, options: DemoOptions = DemoOptions()
    ) async throws -> SendOnce? {
        let store = AccountStore(file: directory.appendingPathComponent(accountFile))
        let url = await store.serverUrl ?? options.defaultServerUrl
        guard let account = await store.account(serverUrl: url) else { return nil }
        return try await sharedSdk(databaseDirectory: databaseDirectory ?? directory, account: account, options: options)
    }

    /// Sends what is due within `deadline` on the shared instance (`sharedSdk`); `nil` when nobody signed up.
    public static func drain(
        directory: URL, databaseDirectory: URL? = nil, deadline: Duration, options: DemoOptions = DemoOptions()
    ) async throws -> DrainSummary? {
        let sdk = try await sharedSdk(directory: directory, databaseDirectory: databaseDirectory, options: options)
        return try await sdk?.drain(deadline: deadline)
    }
}
