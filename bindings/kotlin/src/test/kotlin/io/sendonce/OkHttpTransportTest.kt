package io.sendonce

import io.sendonce.core.*
import kotlinx.coroutines.delay
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import okhttp3.CertificatePinner
import okhttp3.OkHttpClient
import okhttp3.mockwebserver.Dispatcher
import okhttp3.mockwebserver.MockResponse
import okhttp3.mockwebserver.MockWebServer
import okhttp3.mockwebserver.RecordedRequest
import okhttp3.mockwebserver.SocketPolicy
import okhttp3.tls.HandshakeCertificates
import okhttp3.tls.HeldCertificate
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import java.time.Duration
import java.util.concurrent.CopyOnWriteArrayList
import java.util.concurrent.TimeUnit

/** The SDK's requests through the app's OkHttp client: against server-mock, and its certificate pinner on TLS. */
class OkHttpTransportTest : ServerTest() {
    @Test
    fun `a transfer through OkHttp succeeds once against server-mock`() = runBlocking {
        val alice = server.createUser("alice", 1_000_000)
        val bob = server.createUser("bob")
        val config = SendOnceConfig(baseUrl = server.baseUrl, dbPath = server.dbPath(), accessToken = AccessToken(alice.token))
        SendOnce.open(config, null, OkHttpTransport(OkHttpClient())).use { sdk ->
            val t = sdk.sendTransfer(bob.id, 4_000, "BDT")
            assertEquals(TransferState.SUCCEEDED, withTimeout(30_000) { sdk.awaitOutcome(t.localId) }.state)
            assertEquals(1, server.debits(t.idempotencyKey).size)
        }
    }

    /** The first attempt's error as the SDK recorded it, through [client] to [baseUrl]. */
    private suspend fun firstError(baseUrl: String, client: OkHttpClient): String? {
        // The SDK's own bound far above the client's timeout, so the error is OkHttp's; one attempt only.
        val config = SendOnceConfig(
            baseUrl = baseUrl, dbPath = server.dbPath(), accessToken = AccessToken("tok"), requestTimeout = Duration.ofSeconds(60),
            retry = defaultRetryPolicy().copy(base = Duration.ofSeconds(30), jitter = false),
        )
        val errors = CopyOnWriteArrayList<String>()
        SendOnce.open(config, null, OkHttpTransport(client)).use { sdk ->
            sdk.addEventListener { e -> if (e is SdkEvent.AttemptAnswered && e.status == null) e.error?.let { errors += it } }.use {
                sdk.sendTransfer("usr_x", 100, "BDT")
                withTimeout(20_000) { while (errors.isEmpty()) delay(10) }
            }
        }
        return errors.first()
    }

    @Test
    fun `OkHttp's failures reach the SDK typed - a timeout is timed out, a refusal a connection error`() = runBlocking {
        val silent = MockWebServer().apply {
            enqueue(MockResponse().setSocketPolicy(SocketPolicy.NO_RESPONSE))
            start()
        }
        try {
            val client = OkHttpClient.Builder().readTimeout(300, TimeUnit.MILLISECONDS).build()
            // Untyped, it would arrive as "connection error: SocketTimeoutException: ...".
            assertEquals("timed out", firstError("http://127.0.0.1:${silent.port}", client))
        } finally {
            silent.shutdown()
        }
        val free = MockWebServer().apply { start() }.also { it.shutdown() }.port
        val refused = firstError("http://127.0.0.1:$free", OkHttpClient())
        assertTrue(refused!!.startsWith("connection error: ConnectException"), refused)
    }

    @Test
    fun `the app's certificate pin refuses a wrong pin and passes the right one`() = runBlocking {
        val certificate = HeldCertificate.Builder().addSubjectAlternativeName("localhost").build()
        val tls = MockWebServer().apply {
            useHttps(HandshakeCertificates.Builder().heldCertificate(certificate).build().sslSocketFactory(), false)
            dispatcher = object : Dispatcher() {
                override fun dispatch(request: RecordedRequest): MockResponse {
                    val key = request.getHeader("idempotency-key")
                    return MockResponse().setResponseCode(201).setHeader("content-type", "application/json")
                        .setBody("""{"transfer_id":"t_tls","status":"completed","idempotency_key":"$key"}""")
                }
            }
            start()
        }
        val trusting = HandshakeCertificates.Builder().addTrustedCertificate(certificate.certificate).build()
        fun client(pin: String) = OkHttpClient.Builder()
            .sslSocketFactory(trusting.sslSocketFactory(), trusting.trustManager)
            .certificatePinner(CertificatePinner.Builder().add("localhost", pin).build())
            .build()
        val baseUrl = "https://localhost:${tls.port}"
        try {
            val wrong = "sha256/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
            SendOnce.open(SendOnceConfig(baseUrl = baseUrl, dbPath = server.dbPath()), null, OkHttpTransport(client(wrong))).use { sdk ->
                val t = sdk.sendTransfer("usr_x", 100, "BDT")
                withTimeout(20_000) { while (sdk.transfer(t.localId).lastError == null) delay(10) }
                val refused = sdk.transfer(t.localId)
                assertTrue(refused.lastError!!.contains("pinning", ignoreCase = true), "${refused.lastError}")
                assertTrue(!refused.state.isFinal)
                assertEquals(0, tls.requestCount, "nothing reached the server")
            }
            val right = CertificatePinner.pin(certificate.certificate)
            SendOnce.open(SendOnceConfig(baseUrl = baseUrl, dbPath = server.dbPath()), null, OkHttpTransport(client(right))).use { sdk ->
                val t = sdk.sendTransfer("usr_x", 100, "BDT")
                assertEquals(TransferState.SUCCEEDED, withTimeout(20_000) { sdk.awaitOutcome(t.localId) }.state)
                assertEquals(1, tls.requestCount)
            }
        } finally {
            tls.shutdown()
        }
    }
}

/** Which transport opens the SDK when the app passes none: the core's own stack where it has one (this
 * host's build), the platform's OkHttp — one object per process, so `shared()` sees the same — where it
 * has none (the Android build, `--no-default-features`). */
class PlatformTransportTest {
    @Test
    fun `a core without an HTTP stack opens over one OkHttp transport per process`() {
        val first = SendOnce.effectiveTransport(null, builtIn = false)
        assertTrue(first is OkHttpTransport)
        assertTrue(first === SendOnce.effectiveTransport(null, builtIn = false), "one per process")
        assertEquals(null, SendOnce.effectiveTransport(null, builtIn = true), "the core's own stack")
        val given = OkHttpTransport(OkHttpClient())
        assertTrue(given === SendOnce.effectiveTransport(given, builtIn = false), "the app's wins")
        assertTrue(hasBuiltInTransport(), "this host's test build carries the core's stack")
    }
}
