package io.sendonce

import io.sendonce.core.*
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import okhttp3.OkHttpClient
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import java.util.concurrent.CopyOnWriteArrayList

/** Printing what the SDK hands an app never shows a secret. */
class RedactionTest : ServerTest() {
    /**
     * Before: the generated `HttpRequest.toString()` printed `HttpHeader(name=authorization, value=Bearer <token>)`,
     * so a transport that logged its request leaked the token.
     */
    @Test
    fun `a request handed to the app's transport prints without the bearer token, and sends it`() = runBlocking {
        val alice = server.createUser("alice", 1_000_000)
        val bob = server.createUser("bob")
        val printed = CopyOnWriteArrayList<String>()
        val sent = CopyOnWriteArrayList<String>()
        val okHttp = OkHttpTransport(OkHttpClient())
        val logging = object : HttpTransport {
            override suspend fun send(request: HttpRequest): HttpResponse {
                printed += request.toString()
                printed += request.headers.toString()
                sent += request.headers.filter { it.name.equals("authorization", ignoreCase = true) }.map { it.value }
                return okHttp.send(request)
            }
        }
        val config = SendOnceConfig(baseUrl = server.baseUrl, dbPath = server.dbPath(), accessToken = AccessToken(alice.token))
        SendOnce.open(config, null, logging).use { sdk ->
            val t = sdk.sendTransfer(bob.id, 4_000, "BDT")
            assertEquals(TransferState.SUCCEEDED, withTimeout(30_000) { sdk.awaitOutcome(t.localId) }.state)
            assertTrue(printed.any { it.contains(t.idempotencyKey) }, "the other headers still print: $printed")
        }
        assertEquals(listOf("Bearer ${alice.token}"), sent.distinct(), "the token is sent as it is")
        for (line in printed) {
            assertFalse(line.contains(alice.token), "the token leaked: $line")
            assertTrue(line.contains("<redacted>"), line)
        }
    }

    /** Before: the generated data class printed `Transfer(..., toUserId=u_…, note=rent for flat 3B, ...)`. */
    @Test
    fun `a transfer and its request print without the recipient and the note`() = runBlocking {
        val alice = server.createUser("alice", 1_000_000)
        val bob = server.createUser("bob")
        val config = SendOnceConfig(baseUrl = server.baseUrl, dbPath = server.dbPath(), accessToken = AccessToken(alice.token))
        SendOnce.open(config).use { sdk ->
            val t = sdk.sendTransfer(bob.id, 4_000, "BDT", note = "rent for flat 3B")
            val done = withTimeout(30_000) { sdk.awaitOutcome(t.localId) }
            val request = TransferRequest(bob.id, 4_000, "BDT", "rent for flat 3B")
            for (printed in listOf(t.toString(), done.toString(), "$done", request.toString(), sdk.transfers(null, 10).toString())) {
                assertFalse(printed.contains(bob.id), "the recipient leaked: $printed")
                assertFalse(printed.contains("flat 3B"), "the note leaked: $printed")
                assertTrue(printed.contains("<redacted>"), printed)
            }
            assertTrue(done.toString().contains(done.idempotencyKey), "what support needs still prints: $done")
            assertEquals("rent for flat 3B", done.note, "the value itself is there")
        }
    }
}
