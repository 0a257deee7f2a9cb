package io.sendonce.demo

import com.sun.net.httpserver.HttpExchange
import com.sun.net.httpserver.HttpServer
import java.net.InetSocketAddress
import java.util.concurrent.atomic.AtomicInteger

/**
 * A tiny scripted HTTP server for answers server-mock never gives to a correct client: every
 * `POST /v1/transfers` gets [transferStatus] with the problem [transferCode]. The demo's sign-up and wallet
 * calls are answered like server-mock does.
 */
class ScriptedServer(
    private val transferStatus: Int = 422,
    private val transferCode: String = "idempotency_key_reused",
) : AutoCloseable {
    private val server = HttpServer.create(InetSocketAddress("127.0.0.1", 0), 0)
    private val users = AtomicInteger()
    val transferRequests = AtomicInteger()
    val baseUrl: String

    init {
        server.createContext("/") { ex -> handle(ex) }
        server.start()
        baseUrl = "http://127.0.0.1:${server.address.port}"
    }

    private fun handle(ex: HttpExchange) {
        ex.requestBody.readAllBytes()
        val path = ex.requestURI.path
        when {
            ex.requestMethod == "POST" && path == "/v1/test/users" -> {
                val n = users.incrementAndGet()
                reply(ex, 201, "application/json", """{"user_id":"usr_scripted_$n","token":"tok_scripted_$n"}""")
            }
            ex.requestMethod == "GET" && path == "/v1/wallet" ->
                reply(ex, 200, "application/json", """{"user_id":"usr_scripted_1","balance_minor":1000000,"currency":"BDT"}""")
            ex.requestMethod == "POST" && path == "/v1/transfers" -> {
                transferRequests.incrementAndGet()
                val body = """{"type":"about:blank","title":"scripted","status":$transferStatus,"code":"$transferCode",""" +
                    """"detail":"scripted answer"}"""
                reply(ex, transferStatus, "application/problem+json", body)
            }
            else -> reply(ex, 404, "application/problem+json", """{"status":404,"code":"not_found","detail":"$path"}""")
        }
    }

    private fun reply(ex: HttpExchange, status: Int, type: String, body: String) {
        val bytes = body.toByteArray()
        ex.responseHeaders.add("content-type", type)
        ex.sendResponseHeaders(status, bytes.size.toLong())
        ex.responseBody.use { it.write(bytes) }
    }

    override fun close() = server.stop(0)
}
