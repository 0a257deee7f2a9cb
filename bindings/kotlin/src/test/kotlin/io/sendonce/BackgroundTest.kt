package io.sendonce

import io.sendonce.core.*
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertNotSame
import org.junit.jupiter.api.Assertions.assertSame
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows
import okhttp3.OkHttpClient
import java.io.File
import java.time.Duration
import java.util.concurrent.CopyOnWriteArrayList
import kotlin.time.Duration.Companion.milliseconds
import kotlin.time.Duration.Companion.seconds

/** The SDK beyond the open screen, from Kotlin: the shared instance, drain, token refresh, accounts, events, logs. */
class BackgroundTest : ServerTest() {
    private val fastRetry = defaultRetryPolicy().copy(base = Duration.ofMillis(20), cap = Duration.ofMillis(300), budgetBurst = 1000u, budgetPerSecond = 1000.0)

    private fun config(user: User, token: String = user.token, dbPath: String = server.dbPath(), accountId: String? = null) =
        SendOnceConfig(
            baseUrl = server.baseUrl,
            dbPath = dbPath,
            accessToken = AccessToken(token),
            retry = fastRetry,
            requestTimeout = Duration.ofSeconds(5),
            backgroundWakeWindow = Duration.ofMillis(200),
            accountId = accountId,
        )

    @Test
    fun `the UI, a worker and a push handler share one instance, never AlreadyOpen`() = runBlocking {
        val alice = server.createUser("alice", 1_000_000)
        val config = config(alice)
        val ui = SendOnce.shared(config)
        val worker = SendOnce.shared(config)
        assertSame(ui, worker)
        assertThrows<SendOnceException.AlreadyOpen> { SendOnce.open(config) }
        // Two claims: the UI's close() leaves the worker's instance open; the worker's close() closes it.
        ui.close()
        worker.unfinishedTransfers()
        worker.close()
        assertThrows<SendOnceException.Closed> { worker.unfinishedTransfers() }
        val next = SendOnce.shared(config)
        assertNotSame(ui, next, "a closed instance is replaced")
        next.close()
    }

    /**
     * Before: a second shared() with another transport, token provider or base URL got the first instance and
     * its own settings were dropped without a word; the UI's close() closed the worker's instance mid-send.
     */
    @Test
    fun `shared refuses another transport, provider or setting, and one holder's close keeps it open`() = runBlocking {
        val alice = server.createUser("alice", 1_000_000)
        val bob = server.createUser("bob")
        val config = config(alice)
        val pinned = OkHttpTransport(OkHttpClient())
        val provider = recordingProvider(CopyOnWriteArrayList()) { alice.token }
        val ui = SendOnce.shared(config, provider, pinned)
        try {
            val refused = mapOf(
                "a worker without the UI's transport and provider" to suspend { SendOnce.shared(config) },
                "another transport object" to suspend { SendOnce.shared(config, provider, OkHttpTransport(OkHttpClient())) },
                "another token provider" to suspend { SendOnce.shared(config, recordingProvider(ArrayList()) { null }, pinned) },
                "another base URL" to suspend { SendOnce.shared(config.copy(baseUrl = "https://api.example.com"), provider, pinned) },
                "another timeout" to suspend { SendOnce.shared(config.copy(requestTimeout = Duration.ofSeconds(60)), provider, pinned) },
                "another account" to suspend { SendOnce.shared(config.copy(accountId = "usr_other"), provider, pinned) },
            )
            for ((what, call) in refused) {
                val e = runCatching { call() }.exceptionOrNull()
                assertTrue(e is SendOnceException.InvalidConfig, "$what: got $e")
            }
            // The same configuration and objects (a fresher token and another spelling of the path are fine).
            val worker = SendOnce.shared(config.copy(accessToken = AccessToken("fresher")), provider, pinned)
            assertSame(ui, worker)
            ui.close()
            val t = worker.sendTransfer(bob.id, 700, "BDT")
            assertEquals(TransferState.SUCCEEDED, withTimeout(30_000) { worker.awaitOutcome(t.localId) }.state)
            worker.close()
            assertThrows<SendOnceException.Closed> { worker.unfinishedTransfers() }
        } finally {
            ui.close()
        }
    }

    @Test
    fun `another process on the file is Busy, a retry once it is gone succeeds`() = runBlocking {
        val db = server.dbPath("held")
        val java = File(System.getProperty("java.home"), "bin/java").path
        val child = ProcessBuilder(
            java, "-cp", System.getProperty("java.class.path"),
            "-Djna.library.path=${System.getProperty("jna.library.path")}",
            "io.sendonce.HoldFile", db,
        ).redirectError(ProcessBuilder.Redirect.INHERIT).start()
        try {
            val line = child.inputStream.bufferedReader().readLine()
            assertEquals("holding", line)
            val config = SendOnceConfig(baseUrl = "http://127.0.0.1:9", dbPath = db)
            assertThrows<SendOnceException.Busy> { SendOnce.shared(config) }
            child.outputStream.close()
            child.waitFor()
            SendOnce.shared(config).close()
        } finally {
            child.destroyForcibly()
        }
    }

    @Test
    fun `confirmed offline, backgrounded, drained with the network back - Succeeded`() = runBlocking {
        val alice = server.createUser("alice", 1_000_000)
        val bob = server.createUser("bob")
        val sdk = SendOnce.shared(config(alice))
        sdk.use {
            sdk.setNetworkAvailable(false)
            val t = sdk.sendTransfer(bob.id, 2_500, "BDT")
            sdk.setInForeground(false) // no screen, no composer: only the instance stays
            assertEquals(TransferState.PENDING, sdk.transfer(t.localId).state)
            val summary = sdk.drain(20.seconds)
            assertFalse(summary.deadlineReached, "$summary")
            assertEquals(listOf(t.localId), summary.finished.map { it.localId })
            assertEquals(TransferState.SUCCEEDED, summary.finished[0].state)
            assertTrue(summary.unfinished.isEmpty())
            assertEquals(null, summary.nextAttemptIn)
            assertEquals(1, server.debits(t.idempotencyKey).size)
        }
    }

    @Test
    fun `a deadline shorter than the request returns, loses nothing and keeps the key`() = runBlocking {
        val alice = server.createUser("alice", 1_000_000)
        val bob = server.createUser("bob")
        val slow = NetworkProfile.Custom(
            NetsimSettings(seed = 1u, latency = Duration.ofMillis(1_500), latencyJitter = Duration.ZERO, dropRequestRate = 0.0,
                dropResponseRate = 0.0, duplicateRate = 0.0, timeoutRate = 0.0, tunnelEvery = Duration.ZERO,
                tunnelLength = Duration.ZERO, timeout = Duration.ofSeconds(15)),
        )
        SendOnce.shared(config(alice).copy(networkProfile = slow)).use { sdk ->
            sdk.setNetworkAvailable(false)
            val t = sdk.sendTransfer(bob.id, 900, "BDT")
            val short = sdk.drain(200.milliseconds)
            assertTrue(short.deadlineReached, "$short")
            assertEquals(listOf(t.localId), short.unfinished.map { it.localId })
            assertEquals(TransferState.SENDING, short.unfinished[0].state, "returned with the request out")
            assertEquals(0, server.debits(t.idempotencyKey).size, "the server has not answered yet")
            val long = sdk.drain(30.seconds)
            assertEquals(TransferState.SUCCEEDED, long.finished.single().state)
            assertEquals(t.idempotencyKey, long.finished.single().idempotencyKey)
            assertEquals(1, server.debits(t.idempotencyKey).size)
        }
    }

    @Test
    fun `a 401 asks the provider once and retries with the same key`() = runBlocking {
        val alice = server.createUser("alice", 1_000_000)
        val bob = server.createUser("bob")
        val asked = CopyOnWriteArrayList<Boolean>()
        val provider = recordingProvider(asked) { alice.token }
        SendOnce.open(config(alice, token = "expired"), provider, null).use { sdk ->
            val t = sdk.sendTransfer(bob.id, 1_000, "BDT")
            val done = withTimeout(30_000) { sdk.awaitOutcome(t.localId) }
            assertEquals(TransferState.SUCCEEDED, done.state)
            assertEquals(listOf(true), asked.toList())
            assertEquals(1, server.debits(t.idempotencyKey).size)
        }
    }

    @Test
    fun `a provider that throws parks the transfer in AuthRequired, asked once`() = runBlocking {
        val alice = server.createUser("alice", 1_000_000)
        val bob = server.createUser("bob")
        val asked = CopyOnWriteArrayList<Boolean>()
        val provider = recordingProvider(asked) { throw IllegalStateException("keychain locked") }
        SendOnce.open(config(alice, token = "expired"), provider, null).use { sdk ->
            val t = sdk.sendTransfer(bob.id, 1_000, "BDT")
            withTimeout(30_000) { while (sdk.transfer(t.localId).state != TransferState.AUTH_REQUIRED) kotlinx.coroutines.delay(10) }
            assertEquals(listOf(true), asked.toList())
            assertTrue(server.debits(t.idempotencyKey).isEmpty())
            // The app signs in again by hand: the same transfer goes on, same key.
            sdk.setAccessToken(alice.token)
            assertEquals(TransferState.SUCCEEDED, withTimeout(30_000) { sdk.awaitOutcome(t.localId) }.state)
            assertEquals(1, server.debits(t.idempotencyKey).size)
        }
    }

    @Test
    fun `another account is refused while transfers are unfinished, sign-out refuses unless forced`() = runBlocking {
        val alice = server.createUser("alice", 1_000_000)
        val bob = server.createUser("bob")
        SendOnce.open(config(alice, accountId = "acct-kt-alice")).use { sdk ->
            assertEquals("acct-kt-alice", sdk.accountId())
            sdk.setNetworkAvailable(false)
            val t = sdk.sendTransfer(bob.id, 300, "BDT")
            assertThrows<SendOnceException.AccountMismatch> { sdk.signIn("acct-kt-bob", bob.token) }
            assertThrows<SendOnceException.UnfinishedTransfers> { sdk.signOut() }
            val report = sdk.signOut(force = true)
            assertEquals(listOf(t.localId), report.discardedUnfinished.map { it.localId })
            assertTrue(sdk.currentTransfers.isEmpty())
            assertEquals(null, sdk.accountId())
        }
    }

    @Test
    fun `events follow the transfer and the log sink gets no recipient, note or token`() = runBlocking {
        val alice = server.createUser("alice", 1_000_000)
        val bob = server.createUser("bob")
        val lines = CopyOnWriteArrayList<LogRecord>()
        setSendOnceLogSink(LogLevel.TRACE) { lines += it }
        val events = CopyOnWriteArrayList<SdkEvent>()
        try {
            SendOnce.open(config(alice)).use { sdk ->
                sdk.addEventListener { events += it }
                val t = sdk.sendTransfer(bob.id, 700, "BDT", note = "kt-note-marker")
                assertEquals(TransferState.SUCCEEDED, withTimeout(30_000) { sdk.awaitOutcome(t.localId) }.state)
                withTimeout(10_000) { while (events.none { it is SdkEvent.Resolved }) kotlinx.coroutines.delay(10) }
                assertTrue(events.any { it is SdkEvent.AttemptStarted && it.localId == t.localId })
                assertTrue(events.any { it is SdkEvent.AttemptAnswered && it.status == 201.toUShort() })
            }
        } finally {
            setSendOnceLogSink(LogLevel.TRACE, null)
        }
        val text = lines.toList().joinToString("\n") { it.message }
        assertTrue(text.contains("attempt answered"), "the sink got the SDK's lines")
        for (secret in listOf(bob.id, "kt-note-marker", alice.token)) {
            assertFalse(text.contains(secret), "$secret logged")
        }
    }

    /** A token provider that records the `forceRefresh` of every request, then answers with [answer]. */
    private fun recordingProvider(asked: MutableList<Boolean>, answer: () -> String?) = object : AccessTokenProvider {
        override suspend fun token(forceRefresh: Boolean): String? {
            asked += forceRefresh
            return answer()
        }
    }
}
