package io.sendonce

// README.md's Kotlin code, as written there: scripts/check-readme keeps each README block identical to
// the marked region below, and this class runs it against the real server-mock on loopback.

import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test

// --- README.md, app developers, Kotlin --------------------------------------------------------------
import io.sendonce.*
import io.sendonce.core.*
import kotlinx.coroutines.coroutineScope
import kotlinx.coroutines.launch
import kotlin.time.Duration.Companion.minutes

suspend fun payRent(config: SendOnceConfig, landlord: String, show: (List<Transfer>) -> Unit): Transfer =
    coroutineScope {
        // Open: one instance per process, shared by the UI, a WorkManager worker and a push
        // handler; transfers a killed app left unfinished resume here with their own keys.
        val sdk = SendOnce.shared(config)
        // Observe: the history as a Flow, newest first, for a list on screen.
        val history = launch { sdk.transfers.collect { show(it) } }
        // Send: the composer mints one key per intent however many taps, commits the transfer
        // before the first byte leaves, and keeps Send disabled until a definitive answer.
        val composer = sdk.composer()
        val sent = composer.confirm(toUserId = landlord, amountMinor = 50_000, currency = "BDT") // 500.00 BDT
        val outcome = sdk.awaitOutcome(sent.localId) // SUCCEEDED, REJECTED (typed reason), NEEDS_ATTENTION
        history.cancel()
        outcome
    }

// Background, in a CoroutineWorker: send what is due, return by the deadline; non-null = run again then.
suspend fun drainNow(config: SendOnceConfig): java.time.Duration? =
    SendOnce.shared(config).drain(8.minutes).nextAttemptIn
// ----------------------------------------------------------------------------------------------------

class ReadmeDoorsTest {
    @Test
    fun `the README app code runs as written`() = runBlocking {
        MockServer().use { server ->
            val alice = server.createUser("alice", 100_000)
            val bob = server.createUser("bob")
            val config = SendOnceConfig(baseUrl = server.baseUrl, dbPath = server.dbPath(), accessToken = AccessToken(alice.token))
            val lists = mutableListOf<List<Transfer>>()
            val outcome = withTimeout(60_000) { payRent(config, bob.id) { lists += it } }
            assertEquals(TransferState.SUCCEEDED, outcome.state)
            assertEquals(1, server.debits(outcome.idempotencyKey).size)
            assertTrue(lists.isNotEmpty(), "the history flow delivered")
            assertNull(withTimeout(60_000) { drainNow(config) }, "nothing left to send")
            SendOnce.shared(config).close()
        }
    }

    // --- README.md, app developers, Kotlin: test against train mode ----------------------------------
    @Test
    fun `rent moves once on a train`() = runBlocking {
        MockServer().use { server -> // server-mock on loopback (the bindings' test-jar)
            val alice = server.createUser("alice", balanceMinor = 100_000)
            val bob = server.createUser("bob")
            val config = SendOnceConfig(
                baseUrl = server.baseUrl, dbPath = server.dbPath(), accessToken = AccessToken(alice.token),
                clockSpeed = 50.0, // the train's minutes pass in seconds
            )
            SendOnce.open(config).use { sdk ->
                sdk.setNetworkProfile(NetworkProfile.Train, seed = 7) // tunnels, lost answers, replays
                val sent = sdk.sendTransfer(toUserId = bob.id, amountMinor = 5_000, currency = "BDT")
                assertEquals(TransferState.SUCCEEDED, sdk.awaitOutcome(sent.localId).state)
                assertEquals(1, server.debits(sent.idempotencyKey).size) // once, whatever the train did
            }
        }
    }
    // -------------------------------------------------------------------------------------------------
}
