package io.sendonce.demo

import java.io.File
import java.io.IOException
import java.net.HttpURLConnection
import java.net.URI
import java.util.Properties

/** The demo's account on one server: the payer, and a second user to send to. */
data class DemoAccount(val serverUrl: String, val userId: String, val token: String, val recipientId: String) {
    /** Never the token: an account printed to a log or a crash report must not sign anyone in. */
    override fun toString(): String = "DemoAccount(serverUrl=$serverUrl, userId=$userId, token=<redacted>, recipientId=$recipientId)"
}

/** The wallet as `GET /v1/wallet` answers it. */
data class Wallet(val userId: String, val balanceMinor: Long, val currency: String)

/** An HTTP answer the demo did not expect. */
class HttpStatusException(val status: Int, val body: String) : IOException("HTTP $status: ${body.take(200)}")

/**
 * The few plain HTTP calls the demo makes besides transfers (which only the SDK sends): the balance, and
 * the demo sign-up through server-mock's test API. Against a real backend, replace [signUp] with the app's
 * login and keep [wallet]. `HttpURLConnection`, because `java.net.http` does not exist on Android.
 */
class WalletClient(private val timeoutMs: Int = 5_000) {
    /** `GET /v1/wallet` with the bearer token. */
    fun wallet(serverUrl: String, token: String): Wallet {
        val body = send(serverUrl, "GET", "/v1/wallet", null, token, 200)
        return Wallet(
            userId = MiniJson.string(body, "user_id") ?: "",
            balanceMinor = MiniJson.long(body, "balance_minor") ?: throw IOException("no balance in $body"),
            currency = MiniJson.string(body, "currency") ?: "",
        )
    }

    /** Creates the demo payer (with [balanceMinor]) and a recipient on server-mock (`POST /v1/test/users`). */
    fun signUp(serverUrl: String, balanceMinor: Long, currency: String): DemoAccount {
        fun create(name: String, balance: Long): Pair<String, String> {
            val json = """{"display_name":"$name","balance_minor":$balance,"currency":"$currency"}"""
            val body = send(serverUrl, "POST", "/v1/test/users", json, null, 201)
            val id = MiniJson.string(body, "user_id") ?: throw IOException("no user_id in $body")
            val token = MiniJson.string(body, "token") ?: throw IOException("no token in $body")
            return id to token
        }
        val (userId, token) = create("You (sendonce demo)", balanceMinor)
        val (recipientId, _) = create("Rahim (demo recipient)", 0)
        return DemoAccount(serverUrl, userId, token, recipientId)
    }

    private fun send(base: String, method: String, path: String, json: String?, token: String?, expect: Int): String {
        val url = try {
            URI.create(base.trimEnd('/') + path).toURL()
        } catch (e: IllegalArgumentException) {
            throw IOException("bad URL $base", e)
        }
        val connection = url.openConnection() as HttpURLConnection
        try {
            connection.requestMethod = method
            connection.connectTimeout = timeoutMs
            connection.readTimeout = timeoutMs
            connection.useCaches = false
            if (token != null) connection.setRequestProperty("authorization", "Bearer $token")
            if (json != null) {
                connection.doOutput = true
                connection.setRequestProperty("content-type", "application/json")
                connection.outputStream.use { it.write(json.toByteArray()) }
            }
            val status = connection.responseCode
            val stream = if (status >= 400) connection.errorStream else connection.inputStream
            val body = stream?.use { it.readBytes().decodeToString() } ?: ""
            if (status != expect) throw HttpStatusException(status, body)
            return body
        } finally {
            connection.disconnect()
        }
    }
}

/** Remembers the server URL setting and one demo account per server in a properties file. */
class AccountStore(private val file: File) {
    private val props = Properties().apply {
        if (file.isFile) file.inputStream().use { load(it) }
    }

    @get:Synchronized
    @set:Synchronized
    var serverUrl: String?
        get() = props.getProperty("server_url")
        set(value) {
            if (value == null) props.remove("server_url") else props.setProperty("server_url", value)
            save()
        }

    @Synchronized
    fun account(serverUrl: String): DemoAccount? {
        val userId = props.getProperty("$serverUrl.user_id") ?: return null
        val token = props.getProperty("$serverUrl.token") ?: return null
        val recipient = props.getProperty("$serverUrl.recipient_id") ?: ""
        return DemoAccount(serverUrl, userId, token, recipient)
    }

    @Synchronized
    fun save(account: DemoAccount) {
        props.setProperty("${account.serverUrl}.user_id", account.userId)
        props.setProperty("${account.serverUrl}.token", account.token)
        props.setProperty("${account.serverUrl}.recipient_id", account.recipientId)
        save()
    }

    private fun save() {
        file.parentFile?.mkdirs()
        val tmp = File(file.path + ".tmp")
        tmp.outputStream().use { props.store(it, "sendonce demo account") }
        if (!tmp.renameTo(file)) {
            file.delete()
            tmp.renameTo(file)
        }
    }
}

/** Reads one top-level string or integer field of a flat JSON object (enough for the two answers above). */
internal object MiniJson {
    fun string(json: String, key: String): String? =
        Regex("\"" + Regex.escape(key) + "\"\\s*:\\s*\"((?:[^\"\\\\]|\\\\.)*)\"").find(json)?.groupValues?.get(1)
            ?.replace("\\\"", "\"")?.replace("\\\\", "\\")

    fun long(json: String, key: String): Long? =
        Regex("\"" + Regex.escape(key) + "\"\\s*:\\s*(-?\\d+)").find(json)?.groupValues?.get(1)?.toLongOrNull()
}
