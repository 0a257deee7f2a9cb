package io.sendonce

import io.sendonce.core.*
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.CoroutineStart
import kotlinx.coroutines.asCoroutineDispatcher
import kotlinx.coroutines.async
import kotlinx.coroutines.awaitAll
import kotlinx.coroutines.flow.first
import kotlinx.coroutines.flow.toList
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withContext
import kotlinx.coroutines.withTimeout
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertNotNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows
import java.time.Duration
import java.time.Instant
import java.util.concurrent.Executors

/** What makes the Kotlin layer platform-native: main safety, typed errors and reasons, times, flows, paging. */
class IdiomTest : ServerTest() {
    private val fastRetry = defaultRetryPolicy().copy(
        base = Duration.ofMillis(20), cap = Duration.ofMillis(300), budgetBurst = 1000u, budgetPerSecond = 1000.0,
    )

    private fun config(user: User, dbPath: String = server.dbPath(), profile: NetworkProfile? = null, retry: RetryPolicy = fastRetry) =
        SendOnceConfig(baseUrl = server.baseUrl, dbPath = dbPath, accessToken = AccessToken(user.token), retry = retry, networkProfile = profile)

    private fun test(block: suspend CoroutineScope.() -> Unit) = runBlocking { withTimeout(60_000) { block() } }

    /** A single thread standing in for Android's main thread, the way `Dispatchers.Main` is one thread. */
    private fun <T> onMain(block: suspend CoroutineScope.(mainLabel: String) -> T): T =
        Executors.newSingleThreadExecutor { r -> Thread(r, "ui-main") }.asCoroutineDispatcher().use { main ->
            runBlocking(main) { withTimeout(60_000) { block(currentThreadLabel()) } }
        }

    @Test
    fun `no public call does store or network IO on the caller's thread`() {
        val (alice, bob) = server.createUser("alice", 1_000_000) to server.createUser("bob")
        val db = server.dbPath("main-safety")
        val probe = IoProbe.start()
        try {
            val main = onMain { main ->
                val sdk = SendOnce.open(config(alice, dbPath = db))
                val sent = sdk.sendTransfer(bob.id, 100, "BDT")
                sdk.transfer(sent.localId)
                sdk.transfers(after = null, limit = 10)
                sdk.unfinishedTransfers()
                sdk.awaitOutcome(sent.localId)
                sdk.setNetworkAvailable(false)
                sdk.setNetworkAvailable(true)
                sdk.setAccessToken(alice.token)
                sdk.setNetworkProfile(NetworkProfile.Off)
                sdk.networkProfile()
                sdk.currentNetworkProfile
                sdk.networkProfiles.first()
                sdk.networkStats()
                sdk.composer().use { composer ->
                    composer.confirm(bob.id, 200, "BDT")
                    composer.state.first { it is ComposerState.Done }
                    composer.transfer()
                    composer.newIntent()
                }
                sdk.composer(sent.localId).use { it.currentState }
                sdk.transfers.first()
                // The background and account calls too.
                sdk.addEventListener { }.close()
                sdk.setInForeground(false)
                sdk.drain(Duration.ofSeconds(10))
                sdk.setInForeground(true)
                sdk.accountId()
                sdk.signIn("acct-main-safety", alice.token)
                sdk.close()
                SendOnce.shared(config(alice, dbPath = db)).use { shared ->
                    shared.drain(Duration.ofSeconds(10))
                    shared.signOut(force = true)
                }
                SendOnce.wipe(db, force = true)
                main
            }
            val events = probe.events()
            // The probe sees both kinds of I/O (so this test can fail) ...
            assertTrue(events.any { it.kind == IoKind.STORE }, "store transactions recorded: $events")
            assertTrue(events.any { it.kind == IoKind.SEND }, "sends recorded: $events")
            // ... and none of them ran on the caller's thread.
            val onMainThread = events.filter { it.thread == main }
            assertTrue(onMainThread.isEmpty(), "I/O on the caller's thread: $onMainThread")

            // Control: the generated low-level call does its store I/O on the calling thread, and the probe says so.
            val rawMain = onMain { main ->
                val core = SendOnceCore.open(config(alice))
                core.transfers()
                core.shutdown()
                core.close()
                main
            }
            assertTrue(probe.events().any { it.thread == rawMain && it.kind == IoKind.STORE }, "the control saw its I/O")
        } finally {
            probe.stop()
        }
    }

    @Test
    fun `the network profile a screen reads is the core's after concurrent switches, and its flow completes on close`() = test {
        val alice = server.createUser("alice-profile", 0)
        val sdk = SendOnce.open(config(alice, dbPath = server.dbPath("profile"), profile = NetworkProfile.Offline))
        assertEquals(NetworkProfile.Offline, sdk.currentNetworkProfile) // the config's, read at open
        val shown = async(start = CoroutineStart.UNDISPATCHED) { sdk.networkProfiles.toList() }
        val profiles = listOf(NetworkProfile.Off, NetworkProfile.Train, NetworkProfile.Offline)
        Executors.newFixedThreadPool(4).asCoroutineDispatcher().use { pool ->
            repeat(20) { round ->
                (0 until 8).map { i ->
                    async(pool) { sdk.setNetworkProfile(profiles[(round + i) % profiles.size], seed = i.toLong()) }
                }.awaitAll()
                assertEquals(sdk.networkProfile(), sdk.currentNetworkProfile, "round $round")
            }
        }
        val last = sdk.currentNetworkProfile
        sdk.close()
        val seen = shown.await() // completes: close ends the flow
        assertEquals(NetworkProfile.Offline, seen.first())
        assertEquals(last, seen.last())
        assertEquals(last, sdk.currentNetworkProfile) // still readable, never throws
    }

    @Test
    fun `errors keep their fields and have message keys, not sentences`() = test {
        val (alice, bob) = server.createUser("alice", 1_000) to server.createUser("bob")
        SendOnce.open(config(alice)).use { sdk ->
            val e = assertThrows<SendOnceException.InvalidCurrency> { sdk.sendTransfer(bob.id, 10, "XX") }
            assertTrue(e.detail.contains("XX"), e.detail)
            assertEquals("sendonce.error.invalid_currency", e.messageKey)
            val missing = assertThrows<SendOnceException.NotFound> { sdk.transfer("no-such-id") }
            assertEquals("no-such-id", missing.localId)
            assertEquals("sendonce.error.not_found", missing.messageKey)
            assertEquals("sendonce.error.invalid_amount", assertThrows<SendOnceException.InvalidAmount> {
                sdk.sendTransfer(bob.id, SendOnce.maxAmountMinor + 1, "BDT")
            }.messageKey)
        }
        val closed = SendOnce.open(config(alice)).also { it.close() }
        assertEquals("sendonce.error.closed", assertThrows<SendOnceException.Closed> { closed.transfers(null, 1) }.messageKey)
    }

    @Test
    fun `a rejection carries a typed reason and its key`() = test {
        val (alice, bob) = server.createUser("alice", 1_000) to server.createUser("bob")
        SendOnce.open(config(alice)).use { sdk ->
            val poor = sdk.awaitOutcome(sdk.sendTransfer(bob.id, 5_000, "BDT").localId)
            assertEquals(TransferState.REJECTED, poor.state)
            assertEquals(RejectionReason.InsufficientFunds, poor.rejection?.reason)
            assertEquals("insufficient_funds", poor.rejection?.code)
            assertEquals("sendonce.rejection.insufficient_funds", poor.rejection?.reason?.messageKey)

            val nobody = sdk.awaitOutcome(sdk.sendTransfer("usr_nobody", 10, "BDT").localId)
            assertEquals(RejectionReason.RecipientNotFound, nobody.rejection?.reason)
            assertEquals(404.toUShort(), nobody.rejection?.httpStatus)

            // A code the bindings do not know keeps the server's code.
            assertEquals(RejectionReason.Other("card_blocked"), Rejection(RejectionReason.Other("card_blocked"), "card_blocked", "", 402u).reason)
            assertEquals("sendonce.rejection.other", RejectionReason.Other("x").messageKey)
        }
    }

    @Test
    fun `times are Instants and spans Durations, records are immutable`() = test {
        val (alice, bob) = server.createUser("alice", 1_000) to server.createUser("bob")
        val before = Instant.now().minusSeconds(1)
        SendOnce.open(config(alice)).use { sdk ->
            val t = sdk.awaitOutcome(sdk.sendTransfer(bob.id, 10, "BDT").localId)
            assertTrue(!t.createdAt.isBefore(before) && !t.createdAt.isAfter(Instant.now()), "${t.createdAt}")
            assertFalse(t.updatedAt.isBefore(t.createdAt))
            assertNotNull(t.lastAttemptAt)
        }
        assertEquals(Duration.ofDays(1), defaultRetryPolicy().giveUpAfter)
        // Train mode's knobs are Durations too; an unnamed one is the simulator's default.
        val custom = networkProfileSettings(NetworkProfile.Custom(NetsimSettings(latency = Duration.ofMillis(400))), 3u)!!
        assertEquals(Duration.ofMillis(400), custom.latency)
        assertEquals(Duration.ZERO, custom.tunnelEvery)
        assertEquals(Duration.ofSeconds(15), custom.timeout)
        // `val`s only: no setter on any generated record.
        for (record in listOf(Transfer::class.java, TransferRequest::class.java, Rejection::class.java, SendOnceConfig::class.java, RetryPolicy::class.java)) {
            assertTrue(record.methods.none { it.name.startsWith("set") }, "${record.simpleName} has a setter")
        }
    }

    @Test
    fun `flows complete when the SDK closes and the listener gets the changed transfer`() = test {
        val (alice, bob) = server.createUser("alice", 1_000_000) to server.createUser("bob")
        val sdk = SendOnce.open(config(alice, profile = NetworkProfile.Offline))
        val delivered = java.util.concurrent.ConcurrentLinkedQueue<Transfer>()
        sdk.addListener { delivered.add(it) }
        val composer = sdk.composer()
        val sent = composer.confirm(bob.id, 10, "BDT")
        // Undispatched: each collector has its first value before the test goes on.
        val lists = async(start = CoroutineStart.UNDISPATCHED) { sdk.transfers.toList() }
        val states = async(start = CoroutineStart.UNDISPATCHED) { composer.state.toList() }
        val one = async(start = CoroutineStart.UNDISPATCHED) { sdk.transferUpdates(sent.localId).toList() }
        sdk.transferUpdates(sent.localId).first { it != null && it.attempts >= 1u }
        sdk.close()
        // Each collection ends instead of hanging (the test's timeout would fail it).
        assertTrue(lists.await().isNotEmpty())
        assertTrue(states.await().isNotEmpty())
        assertTrue(one.await().isNotEmpty())
        assertTrue(delivered.isNotEmpty() && delivered.all { it.localId == sent.localId }, "$delivered")
        assertTrue(delivered.any { it.attempts >= 1u }, "the listener saw the attempt: $delivered")
    }

    @Test
    fun `the flow's list, built from deliveries, equals the store's, and pages cover it once`() = test {
        val (alice, bob) = server.createUser("alice", 1_000_000) to server.createUser("bob")
        SendOnce.open(config(alice)).use { sdk ->
            val sent = (1..5).map { sdk.sendTransfer(bob.id, 10L * it, "BDT") }
            sent.forEach { sdk.awaitOutcome(it.localId) }
            val stored = sdk.transfers(after = null, limit = 500)
            val listed = sdk.transfers.first { list -> list.size == 5 && list.all { it.state == TransferState.SUCCEEDED } }
            assertEquals(stored, listed)
            val pages = mutableListOf<List<Transfer>>()
            var after: String? = null
            do {
                val page = sdk.transfers(after = after, limit = 2)
                pages += page
                after = page.lastOrNull()?.localId
            } while (page.isNotEmpty())
            assertEquals(listOf(2, 2, 1, 0), pages.map { it.size })
            assertEquals(stored.map { it.localId }, pages.flatten().map { it.localId })
            assertEquals(sent.reversed().map { it.localId }, stored.map { it.localId }, "newest first")
        }
    }

    @Test
    fun `a screen re-attaches to its receipt after process death`() = test {
        val (alice, bob) = server.createUser("alice", 1_000) to server.createUser("bob")
        val db = server.dbPath("restore")
        val savedId = SendOnce.open(config(alice, dbPath = db, profile = NetworkProfile.Offline)).use { sdk ->
            sdk.composer().use { it.confirm(bob.id, 10, "BDT").localId }
        }
        // A new process: only the local id survived (SavedStateHandle); the SDK decides what the screen shows.
        SendOnce.open(config(alice, dbPath = db)).use { sdk ->
            sdk.composer(savedId).use { screen ->
                assertFalse(screen.isSendEnabled)
                val done = screen.state.first { it is ComposerState.Done } as ComposerState.Done
                assertEquals(savedId, done.receipt.localId)
            }
            withContext(kotlinx.coroutines.Dispatchers.Default) {
                sdk.composer(savedId).use { again -> assertTrue(again.currentState is ComposerState.Done) }
            }
        }
    }
}
