package io.sendonce

/**
 * What a later [SendOnce.shared] call must agree on with the call that opened the instance: every setting of
 * [SendOnceConfig] but the access token (a caller may hold a fresher one; `setAccessToken` replaces it), the
 * starting network profile (switched at run time) and the path's spelling (the file is compared); the token
 * provider and the transport by identity (the same object), since the Rust core sees a new handle per call.
 */
internal class SharedSettings(config: SendOnceConfig, private val tokenProvider: AccessTokenProvider?, private val transport: HttpTransport?) {
    private val config = config.copy(accessToken = null, networkProfile = null, dbPath = "")

    /** The names of what differs from [other] (never the values: a URL or an account id may be personal). */
    fun differences(other: SharedSettings): List<String> = buildList {
        if (config.baseUrl != other.config.baseUrl) add("base URL")
        if (config.accountId != other.config.accountId) add("account")
        if (config.copy(baseUrl = "", accountId = null) != other.config.copy(baseUrl = "", accountId = null)) {
            add("setting (timeouts, retry policy, retention, clock speed or logging)")
        }
        if (tokenProvider !== other.tokenProvider) add("token provider")
        if (transport !== other.transport) add("transport")
    }
}
