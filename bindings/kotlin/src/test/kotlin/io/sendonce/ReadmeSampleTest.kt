package io.sendonce

import io.sendonce.core.*
import kotlinx.coroutines.coroutineScope
import kotlinx.coroutines.launch
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Test

/** bindings/README.md's Kotlin sample, verbatim: it compiles, returns, and its collect ends. */
class ReadmeSampleTest {
    // --- from bindings/README.md -------------------------------------------------------------------
    suspend fun pay(baseUrl: String, dbPath: String, token: String, toUserId: String, savedId: String?): Transfer = coroutineScope {
        val sdk = SendOnce.open(SendOnceConfig(baseUrl = baseUrl, dbPath = dbPath, accessToken = AccessToken(token)))
        val seen = mutableListOf<List<Transfer>>()
        val list = launch { sdk.transfers.collect { seen += it } }        // completes when the SDK closes
        val composer = sdk.restoreComposer(savedId)                       // savedId: from SavedStateHandle
        val t = composer.confirm(toUserId = toUserId, amountMinor = 50_000, currency = "BDT")   // 500.00 BDT
        val outcome = sdk.awaitOutcome(t.localId)
        when (outcome.rejection?.reason) {
            RejectionReason.InsufficientFunds -> println("not enough money")
            else -> println("${outcome.state} at ${outcome.updatedAt}")   // java.time.Instant
        }
        println("history: ${sdk.transfers(after = null, limit = 50).size}, seen ${seen.size} lists")
        sdk.close()                                                       // ends `list` and the composer's flows
        list.join()
        outcome
    }
    // -------------------------------------------------------------------------------------------------

    @Test
    fun `the README sample runs as written`() {
        MockServer().use { server ->
            val alice = server.createUser("alice", 1_000_000)
            val bob = server.createUser("bob")
            val outcome = runBlocking { withTimeout(60_000) { pay(server.baseUrl, server.dbPath(), alice.token, bob.id, null) } }
            assertEquals(TransferState.SUCCEEDED, outcome.state)
            assertEquals(1, server.debits(outcome.idempotencyKey).size)
        }
    }
}
