package io.sendonce

import io.sendonce.core.*
import kotlinx.coroutines.delay
import kotlinx.coroutines.flow.first
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import okhttp3.OkHttpClient
import okhttp3.mockwebserver.Dispatcher
import okhttp3.mockwebserver.MockResponse
import okhttp3.mockwebserver.MockWebServer
import okhttp3.mockwebserver.RecordedRequest
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows
import java.io.File
import java.util.concurrent.CopyOnWriteArrayList
import kotlin.io.path.createTempDirectory

/** A bank's own API through the SDK: its operation, its contract, its step-up authentication (RequiresAction). */
class OperationsTest {
    // --- README: the bank's own request, Kotlin ---------------------------------------------------
    val bank = ResponseContract(
        keyHeader = "x-request-key",
        keyEcho = AnswerLocator.Header(name = "x-request-key"),
        operationId = AnswerLocator.Header(name = "x-operation-id"),
        problem = ProblemFormat(contentType = "application/vnd.bank.error+json", code = "/error/code", detail = "/error/message"),
        refusals = listOf(RefusalCode(code = "FUNDS_INSUFFICIENT", reason = RejectionReason.InsufficientFunds)),
        actionRequired = ActionRule(
            codes = listOf("SCA_REQUIRED"),
            url = AnswerLocator.Body(pointer = "/error/sca/redirect_url"),
            challengeId = AnswerLocator.Body(pointer = "/error/sca/challenge_id"),
        ),
        lookup = LookupRoute(path = "/api/v2/payment-orders/by-key/{key}", notFoundCodes = listOf("ORDER_NOT_FOUND")),
    )

    fun paymentOrder(amount: String) = operation("payment_order", OperationMethod.POST, "/api/v2/payment-orders") {
        header("x-channel", "mobile")
        json("""{"source_account":"DE02-ACC-1","amount":{"value":"$amount","currency":"EUR"},"metadata":{"basket":"b-7"}}""")
        counterparty = "DE89370400440532013000"
        amountMinor = 1250
        currency = "EUR"
    }

    // Committed with its key before the first byte leaves; parked while the customer completes the
    // bank's step (3-D Secure, SCA), then sent again with the same key and the same bytes.
    suspend fun payOrder(sdk: SendOnce, amount: String, completeStep: suspend (RequiredAction) -> Unit): Transfer {
        val sent = sdk.sendOperation(paymentOrder(amount))
        var outcome = sdk.awaitOutcome(sent.localId)
        while (outcome.state == TransferState.REQUIRES_ACTION) {
            completeStep(outcome.requiredAction!!) // open outcome.requiredAction.url, wait for the customer
            sdk.actionCompleted(sent.localId)
            outcome = sdk.awaitOutcome(sent.localId)
        }
        return outcome // SUCCEEDED with the bank's order id, or REJECTED with a typed reason
    }
    // --- end README ---------------------------------------------------------------------------------

    internal class Bank : AutoCloseable {
        val posts = CopyOnWriteArrayList<RecordedRequest>()
        val server = MockWebServer().apply {
            dispatcher = object : Dispatcher() {
                override fun dispatch(request: RecordedRequest): MockResponse {
                    if (request.method == "GET") {
                        return MockResponse().setResponseCode(404).setHeader("content-type", "application/vnd.bank.error+json")
                            .setBody("""{"error":{"code":"ORDER_NOT_FOUND"}}""")
                    }
                    posts += request
                    val key = request.getHeader("x-request-key") ?: ""
                    return if (posts.size == 1) {
                        MockResponse().setResponseCode(428).setHeader("content-type", "application/vnd.bank.error+json")
                            .setBody("""{"error":{"code":"SCA_REQUIRED","sca":{"redirect_url":"https://bank.example/sca/ch_1","challenge_id":"ch_1"}}}""")
                    } else {
                        MockResponse().setResponseCode(201).setHeader("content-type", "application/json")
                            .setHeader("x-request-key", key).setHeader("x-operation-id", "po_1").setBody("""{"status":"EXECUTED"}""")
                    }
                }
            }
            start()
        }
        val url: String get() = "http://127.0.0.1:${server.port}"
        override fun close() = server.shutdown()
    }

    private fun config(url: String, db: String) =
        SendOnceConfig(baseUrl = url, dbPath = db, accessToken = AccessToken("tok"), contract = bank)

    @Test
    fun `a step-up answer parks the order, survives a reopen, and resumes with the same key and bytes`() = runBlocking {
        Bank().use { bank ->
            val db = createTempDirectory("sendonce-ops").resolve("d.db").toString()
            val localId = SendOnce.open(config(bank.url, db), null, OkHttpTransport(OkHttpClient())).use { sdk ->
                sdk.composer().use { composer ->
                    val first = composer.confirm(paymentOrder("12.50"))
                    assertEquals("payment_order", first.operationType)
                    val parked = withTimeout(20_000) { composer.state.first { it is ComposerState.RequiresAction } }
                    assertEquals("ch_1", parked.requiredAction?.challengeId)
                    assertEquals("https://bank.example/sca/ch_1", parked.requiredAction?.url)
                    assertFalse(composer.isSendEnabled)
                    // A second tap while parked: the same order, no second key.
                    assertEquals(first.localId, composer.confirm(paymentOrder("12.50")).localId)
                    assertEquals(1, sdk.transfers(null, 10).size)
                    first.localId
                }
            }
            // The app was closed while the customer was in the banking app: still parked.
            SendOnce.open(config(bank.url, db), null, OkHttpTransport(OkHttpClient())).use { sdk ->
                assertEquals(TransferState.REQUIRES_ACTION, sdk.transfer(localId).state)
                assertEquals(1, bank.posts.size)
                sdk.actionCompleted(localId)
                val done = withTimeout(20_000) { sdk.awaitOutcome(localId) }
                assertEquals(TransferState.SUCCEEDED, done.state)
                assertEquals("po_1", done.serverTransferId)
            }
            assertEquals(2, bank.posts.size)
            val (a, b) = bank.posts
            assertEquals(a.getHeader("x-request-key"), b.getHeader("x-request-key"))
            assertEquals(a.body.readUtf8(), b.body.readUtf8())
            assertEquals("mobile", b.getHeader("x-channel"))
            assertEquals("/api/v2/payment-orders", b.path)
        }
    }

    @Test
    fun `the README's order is paid once, through the customer's step, under one key`() = runBlocking {
        Bank().use { bank ->
            val db = createTempDirectory("sendonce-ops").resolve("d.db").toString()
            SendOnce.open(config(bank.url, db), null, OkHttpTransport(OkHttpClient())).use { sdk ->
                val steps = mutableListOf<String?>()
                val done = withTimeout(20_000) { payOrder(sdk, "12.50") { steps += it.challengeId } }
                assertEquals(TransferState.SUCCEEDED, done.state)
                assertEquals("po_1", done.serverTransferId)
                assertEquals(listOf<String?>("ch_1"), steps)
            }
            val (a, b) = bank.posts
            assertEquals(a.getHeader("x-request-key"), b.getHeader("x-request-key"))
            assertEquals(a.body.readUtf8(), b.body.readUtf8())
        }
    }

    @Test
    fun `an order parked when its process is SIGKILLed stays parked, and resumes with its key and bytes`() = runBlocking {
        Bank().use { bank ->
            val db = createTempDirectory("sendonce-ops").resolve("d.db").toString()
            val java = File(System.getProperty("java.home"), "bin/java").path
            val child = ProcessBuilder(
                java, "-cp", System.getProperty("java.class.path"),
                "-Djna.library.path=${System.getProperty("jna.library.path")}",
                "io.sendonce.ParkOrder", bank.url, db,
            ).redirectError(ProcessBuilder.Redirect.INHERIT).start()
            val localId = try {
                val line = child.inputStream.bufferedReader().readLine() ?: error("the child ended before parking")
                assertTrue(line.startsWith("parked "), line)
                line.removePrefix("parked ")
            } finally {
                // Process.destroyForcibly is SIGKILL on Linux: no close, no flush, as when Android kills an app.
                child.destroyForcibly().waitFor()
            }
            assertEquals(137, child.exitValue(), "killed by SIGKILL")
            SendOnce.open(config(bank.url, db), null, OkHttpTransport(OkHttpClient())).use { sdk ->
                assertEquals(TransferState.REQUIRES_ACTION, sdk.transfer(localId).state)
                // Parked is parked: no attempt however long it waits (the sender would retry within a second).
                delay(1_500)
                assertEquals(1, bank.posts.size, "no attempt while parked")
                assertEquals(TransferState.REQUIRES_ACTION, sdk.transfer(localId).state)
                sdk.actionCompleted(localId)
                assertEquals(TransferState.SUCCEEDED, withTimeout(20_000) { sdk.awaitOutcome(localId) }.state)
            }
            val (a, b) = bank.posts
            assertEquals(a.getHeader("x-request-key"), b.getHeader("x-request-key"))
            assertEquals(a.body.readUtf8(), b.body.readUtf8())
        }
    }

    @Test
    fun `a contract that cannot tell the bank from a proxy is refused at open`() {
        val db = createTempDirectory("sendonce-ops").resolve("d.db").toString()
        val blind = bank.copy(keyEcho = null)
        assertThrows<SendOnceException.InvalidConfig> { runBlocking { SendOnce.open(config("http://127.0.0.1:9", db).copy(contract = blind)) } }
        val html = bank.copy(problem = bank.problem.copy(contentType = "text/html"))
        assertThrows<SendOnceException.InvalidConfig> { runBlocking { SendOnce.open(config("http://127.0.0.1:9", db).copy(contract = html)) } }
    }
}
