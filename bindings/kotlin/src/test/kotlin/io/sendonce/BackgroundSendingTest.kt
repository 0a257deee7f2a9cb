package io.sendonce

import io.sendonce.core.*
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.SupervisorJob
import kotlinx.coroutines.cancel
import kotlinx.coroutines.delay
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.BeforeEach
import org.junit.jupiter.api.Test
import java.time.Duration
import java.util.concurrent.CopyOnWriteArrayList
import kotlin.time.Duration.Companion.milliseconds
import kotlin.time.Duration.Companion.seconds

/**
 * Background sending's decisions against the real core and server-mock: what WorkManager is asked to do
 * at start, at confirm and from the worker (issue 31 point 4: before, the demo enqueued a drain only when
 * its screen was cleared, so a transfer confirmed offline and swiped away waited for the next launch).
 */
class BackgroundSendingTest : ServerTest() {
    private val requests = CopyOnWriteArrayList<DrainRequest>()
    private val background = BackgroundSending(DrainScheduler { requests += it })
    @BeforeEach
    fun fresh() = requests.clear() // one instance serves the class (ServerTest starts server-mock once)

    private val fastRetry = defaultRetryPolicy().copy(base = Duration.ofMillis(20), cap = Duration.ofMillis(200), budgetBurst = 1000u, budgetPerSecond = 1000.0)

    private fun config(user: User, dbPath: String, profile: NetworkProfile = NetworkProfile.Off) = SendOnceConfig(
        baseUrl = server.baseUrl, dbPath = dbPath, accessToken = AccessToken(user.token), retry = fastRetry,
        requestTimeout = Duration.ofSeconds(5), networkProfile = profile,
    )

    private suspend fun awaitRequests(n: Int) = withTimeout(10.seconds) { while (requests.size < n) delay(10) }

    @Test
    fun `a transfer confirmed offline asks for an expedited unique drain at once, and one left at start asks again`() = runBlocking<Unit> {
        val alice = server.createUser("alice", 100_000)
        val bob = server.createUser("bob")
        val db = server.dbPath()
        val scope = CoroutineScope(SupervisorJob() + Dispatchers.Default)
        try {
            val sent = SendOnce.open(config(alice, db, NetworkProfile.Offline)).use { sdk ->
                background.attach(sdk, scope)
                delay(100)
                assertEquals(emptyList<DrainRequest>(), requests.toList(), "nothing unfinished at start: nothing to ask")
                val t = sdk.sendTransfer(toUserId = bob.id, amountMinor = 5_000, currency = "BDT")
                awaitRequests(1)
                t
            }
            assertEquals(DrainRequest("sendonce-drain", DrainPolicy.KEEP, Duration.ZERO, expedited = true), requests.single())
            // The app was swiped away; at the next start (or a cold start by a push) the transfer is still unfinished.
            requests.clear()
            SendOnce.open(config(alice, db, NetworkProfile.Offline)).use { sdk ->
                background.attach(sdk, scope)
                awaitRequests(1)
                assertEquals(DrainRequest("sendonce-drain", DrainPolicy.KEEP, Duration.ZERO, expedited = false), requests.single())
                assertTrue(sdk.transfer(sent.localId).state != TransferState.SUCCEEDED)
            }
        } finally {
            scope.cancel()
        }
    }

    @Test
    fun `the worker drains, chains its next run while something is due, and stops when all is done`() = runBlocking<Unit> {
        val alice = server.createUser("alice", 100_000)
        val bob = server.createUser("bob")
        val db = server.dbPath()
        val sent = SendOnce.open(config(alice, db, NetworkProfile.Offline)).use { sdk ->
            val t = sdk.sendTransfer(toUserId = bob.id, amountMinor = 5_000, currency = "BDT")
            // Offline: the drain cannot finish it; the worker enqueues its own next run at the next attempt.
            assertEquals(WorkerOutcome.SUCCESS, background.runWorker(sdk, 300.milliseconds))
            val next = requests.single()
            assertEquals(DrainPolicy.APPEND_OR_REPLACE, next.policy)
            assertTrue(!next.initialDelay.isNegative && next.initialDelay <= Duration.ofSeconds(1), "${next.initialDelay}")
            t
        }
        requests.clear()
        // Online again: the worker sends it (same key) and asks for nothing more.
        SendOnce.open(config(alice, db)).use { sdk ->
            assertEquals(WorkerOutcome.SUCCESS, background.runWorker(sdk, 10.seconds))
            assertEquals(TransferState.SUCCEEDED, sdk.transfer(sent.localId).state)
            assertEquals(emptyList<DrainRequest>(), requests.toList())
            assertEquals(1, server.debits(sent.idempotencyKey).size)
        }
    }
}
