// Copied from bindings/kotlin/src/test/kotlin/io/sendonce/MockServer.kt (test helpers are not in the published jar).
package io.sendonce.demo

import java.io.File
import java.net.URI
import java.net.http.HttpClient
import java.net.http.HttpRequest
import java.net.http.HttpResponse
import java.nio.file.Files
import java.time.Duration
import java.util.concurrent.TimeUnit

/** A user of the mock server. */
data class User(val id: String, val token: String)

/** One ledger row of the mock server. */
data class LedgerEntry(val kind: String, val userId: String, val amountMinor: Long, val idempotencyKey: String?, val transferId: String?)

/**
 * The real server-mock binary on a free loopback port, with its own database file; killed by [close].
 * The binary is `server-mock` in `-Dsendonce.cargo.target`/debug (or `-Dsendonce.server.mock`), built with
 * `cargo build -p server-mock`.
 */
class MockServer : AutoCloseable {
    val dir: File = Files.createTempDirectory("sendonce-kt-").toFile()
    private val process: Process
    val baseUrl: String
    private val http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build()

    init {
        val binary = File(
            System.getProperty("sendonce.server.mock")
                ?: "${System.getProperty("sendonce.cargo.target") ?: "../../target"}/debug/server-mock",
        )
        check(binary.canExecute()) { "no server-mock binary at $binary: run `cargo build -p server-mock`" }
        process = ProcessBuilder(binary.path, "--listen", "127.0.0.1:0", "--db", File(dir, "server.db").path)
            .redirectError(ProcessBuilder.Redirect.appendTo(File(dir, "server.log")))
            .start()
        val line = process.inputStream.bufferedReader().readLine()
            ?: error("server-mock exited before listening; see ${File(dir, "server.log")}")
        val addr = line.removePrefix("listening on ").trim()
        check(addr != line) { "unexpected first line from server-mock: $line" }
        baseUrl = "http://$addr"
    }

    /** A fresh database path for an SDK instance. */
    fun dbPath(name: String = "client"): String = File(dir, "$name-${System.nanoTime()}.db").path

    fun createUser(name: String, balanceMinor: Long = 0, currency: String = "BDT"): User {
        val body = """{"display_name":"$name","balance_minor":$balanceMinor,"currency":"$currency"}"""
        val json = Json.parse(request("POST", "/v1/test/users", body, expect = 201)) as Map<*, *>
        return User(json["user_id"] as String, json["token"] as String)
    }

    fun ledger(): List<LedgerEntry> = (Json.parse(request("GET", "/v1/test/ledger")) as List<*>).map {
        val e = it as Map<*, *>
        LedgerEntry(
            kind = e["kind"] as String,
            userId = e["user_id"] as String,
            amountMinor = (e["amount_minor"] as Number).toLong(),
            idempotencyKey = e["idempotency_key"] as String?,
            transferId = e["transfer_id"] as String?,
        )
    }

    /** Debits recorded under [key]. */
    fun debits(key: String): List<LedgerEntry> = ledger().filter { it.kind == "debit" && it.idempotencyKey == key }

    fun balance(user: User): Long {
        val json = Json.parse(request("GET", "/v1/wallet", token = user.token)) as Map<*, *>
        return (json["balance_minor"] as Number).toLong()
    }

    private fun request(method: String, path: String, body: String? = null, token: String? = null, expect: Int = 200): String {
        val builder = HttpRequest.newBuilder(URI.create(baseUrl + path)).timeout(Duration.ofSeconds(10))
        if (body != null) builder.header("content-type", "application/json")
        if (token != null) builder.header("authorization", "Bearer $token")
        builder.method(method, if (body == null) HttpRequest.BodyPublishers.noBody() else HttpRequest.BodyPublishers.ofString(body))
        val response = http.send(builder.build(), HttpResponse.BodyHandlers.ofString())
        check(response.statusCode() == expect) { "$method $path answered ${response.statusCode()}: ${response.body()}" }
        return response.body()
    }

    override fun close() {
        process.destroy()
        if (!process.waitFor(5, TimeUnit.SECONDS)) process.destroyForcibly().waitFor()
        dir.deleteRecursively()
    }
}

/** A minimal JSON reader for the test API's answers (objects, arrays, strings, numbers, booleans, null). */
object Json {
    fun parse(text: String): Any? = Reader(text).run { value().also { skipWs(); check(i == s.length) { "trailing JSON at $i" } } }

    private class Reader(val s: String) {
        var i = 0

        fun skipWs() {
            while (i < s.length && s[i].isWhitespace()) i++
        }

        fun value(): Any? {
            skipWs()
            return when (val c = s[i]) {
                '{' -> obj()
                '[' -> arr()
                '"' -> str()
                't' -> literal("true", true)
                'f' -> literal("false", false)
                'n' -> literal("null", null)
                else -> if (c == '-' || c.isDigit()) num() else error("bad JSON at $i: $c")
            }
        }

        fun literal(word: String, v: Any?): Any? {
            check(s.startsWith(word, i)) { "bad JSON at $i" }
            i += word.length
            return v
        }

        fun num(): Number {
            val start = i
            while (i < s.length && (s[i].isDigit() || s[i] in "+-.eE")) i++
            val t = s.substring(start, i)
            return if (t.any { it in ".eE" }) t.toDouble() else t.toLong()
        }

        fun str(): String {
            val b = StringBuilder()
            i++
            while (s[i] != '"') {
                if (s[i] == '\\') {
                    i++
                    when (val e = s[i]) {
                        'n' -> b.append('\n')
                        't' -> b.append('\t')
                        'r' -> b.append('\r')
                        'b' -> b.append('\b')
                        'f' -> b.append('\u000c')
                        'u' -> { b.append(s.substring(i + 1, i + 5).toInt(16).toChar()); i += 4 }
                        else -> b.append(e)
                    }
                } else {
                    b.append(s[i])
                }
                i++
            }
            i++
            return b.toString()
        }

        fun arr(): List<Any?> {
            val out = mutableListOf<Any?>()
            i++
            skipWs()
            if (s[i] == ']') { i++; return out }
            while (true) {
                out.add(value())
                skipWs()
                if (s[i++] == ']') return out
            }
        }

        fun obj(): Map<String, Any?> {
            val out = linkedMapOf<String, Any?>()
            i++
            skipWs()
            if (s[i] == '}') { i++; return out }
            while (true) {
                skipWs()
                val k = str()
                skipWs()
                i++ // ':'
                out[k] = value()
                skipWs()
                if (s[i++] == '}') return out
            }
        }
    }
}
