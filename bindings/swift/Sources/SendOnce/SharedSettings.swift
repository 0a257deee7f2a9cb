import SendOnceFFI

/// What a later `SendOnce.shared` call must agree on with the call that opened the instance: every setting of
/// `SendOnceConfig` but the access token (a caller may hold a fresher one; `setAccessToken` replaces it), the
/// starting network profile (switched at run time) and the path's spelling (the file is compared); the token
/// provider and the transport by identity (the same object), since the Rust core sees a new handle per call.
struct SharedSettings: Sendable {
    private let baseUrl: String
    private let accountId: String?
    private let settings: String
    // Safe as identities: the open instance keeps both objects alive, so neither address is reused meanwhile.
    private let tokenProvider: ObjectIdentifier?
    private let transport: ObjectIdentifier?

    init(_ c: SendOnceConfig, tokenProvider: AccessTokenProvider?, transport: HttpTransport?) {
        baseUrl = c.baseUrl
        accountId = c.accountId
        settings = String(describing: (
            c.retry, c.requestTimeout, c.connectTimeout, c.maxConcurrentSends, c.clockSpeed, c.retention,
            c.tokenTimeout, c.backgroundWakeWindow, c.logPersonalData
        ))
        self.tokenProvider = tokenProvider.map { ObjectIdentifier($0 as AnyObject) }
        self.transport = transport.map { ObjectIdentifier($0 as AnyObject) }
    }

    /// The names of what differs from `other` (never the values: a URL or an account id may be personal).
    func differences(_ other: SharedSettings) -> [String] {
        var differ: [String] = []
        if baseUrl != other.baseUrl { differ.append("base URL") }
        if accountId != other.accountId { differ.append("account") }
        if settings != other.settings { differ.append("setting (timeouts, retry policy, retention, clock speed or logging)") }
        if tokenProvider != other.tokenProvider { differ.append("token provider") }
        if transport != other.transport { differ.append("transport") }
        return differ
    }
}
