package io.sendonce

import io.sendonce.core.*
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.async
import kotlinx.coroutines.awaitAll
import kotlinx.coroutines.coroutineScope
import kotlinx.coroutines.flow.first
import kotlinx.coroutines.flow.takeWhile
import kotlinx.coroutines.flow.toList
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertNotNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows
import java.io.File
import java.time.Duration
import java.util.concurrent.atomic.AtomicInteger
import kotlin.random.Random

/** The Kotlin bindings against the real Rust library and the real server-mock on loopback. */
class SendOnceTest : ServerTest() {
    private val fastRetry = defaultRetryPolicy().copy(base = Duration.ofMillis(20), cap = Duration.ofMillis(300), budgetBurst = 1000u, budgetPerSecond = 1000.0)

    private fun config(
        user: User,
        dbPath: String = server.dbPath(),
        profile: NetworkProfile? = null,
        clockSpeed: Double = 1.0,
        retry: RetryPolicy? = fastRetry,
    ) = SendOnceConfig(
        baseUrl = server.baseUrl,
        dbPath = dbPath,
        accessToken = AccessToken(user.token),
        retry = retry,
        requestTimeout = Duration.ofSeconds(5),
        networkProfile = profile,
        clockSpeed = clockSpeed,
    )

    private fun pair(balance: Long = 1_000_000): Pair<User, User> =
        server.createUser("alice", balance) to server.createUser("bob")

    private fun test(block: suspend kotlinx.coroutines.CoroutineScope.() -> Unit) =
        runBlocking { withTimeout(60_000) { block() } }

    @Test
    fun `a config never prints its access token`() {
        val printed = SendOnceConfig(
            baseUrl = "https://api.example.com",
            dbPath = "x.db",
            accessToken = AccessToken("tok_secret_123"),
        ).toString()
        assertFalse(printed.contains("tok_secret_123"), printed)
    }

    @Test
    fun `send a transfer and it succeeds with one debit`() = test {
        val (alice, bob) = pair()
        SendOnce.open(config(alice)).use { sdk ->
            val sent = sdk.sendTransfer(toUserId = bob.id, amountMinor = 12_345, currency = "BDT", note = "rent")
            assertTrue(sent.idempotencyKey.isNotEmpty())
            val done = sdk.awaitOutcome(sent.localId)
            assertEquals(TransferState.SUCCEEDED, done.state)
            assertTrue(done.state.isFinal)
            assertNotNull(done.serverTransferId)
            assertEquals(sent.idempotencyKey, done.idempotencyKey)
            // The StateFlow of transfers, built on the listener, reaches the same state.
            val listed = sdk.transfers.first { list -> list.any { it.localId == sent.localId && it.state == TransferState.SUCCEEDED } }
            assertEquals(1, listed.size)
            assertEquals(1, server.debits(sent.idempotencyKey).size)
            assertEquals(1_000_000 - 12_345, server.balance(alice))
            assertEquals(12_345, server.balance(bob))
        }
    }

    @Test
    fun `composer double confirm returns the same transfer and Send stays disabled until done`() = test {
        val (alice, bob) = pair()
        // Latency keeps the first attempt in flight while the user taps again.
        val slow = NetworkProfile.Custom(NetsimSettings(latency = Duration.ofMillis(400)))
        SendOnce.open(config(alice, profile = slow)).use { sdk ->
            sdk.composer().use { composer ->
                assertEquals(ComposerState.Editing, composer.currentState)
                assertTrue(composer.isSendEnabled)
                val request = TransferRequest(toUserId = bob.id, amountMinor = 500, currency = "BDT")
                // Two taps racing each other, then a third with other fields: one intent, one transfer.
                val taps = coroutineScope {
                    List(2) { async(Dispatchers.Default) { composer.confirm(request) } }.awaitAll()
                }
                assertFalse(composer.isSendEnabled, "Send must be disabled right after confirm")
                val third = composer.confirm(request.copy(amountMinor = 999))
                val all = taps + third
                assertEquals(1, all.map { it.localId }.toSet().size, "one transfer for every tap")
                assertEquals(1, all.map { it.idempotencyKey }.toSet().size, "one key for every tap")

                // Every state between the confirm and Done keeps Send disabled.
                val seen = composer.state.takeWhile { it !is ComposerState.Done }.toList()
                assertTrue(seen.none { it.sendEnabled }, "Send enabled before done: $seen")
                assertTrue(composer.currentState is ComposerState.Done)
                assertFalse(composer.isSendEnabled, "after Done, Send stays off until a new intent")
                val receipt = (composer.currentState as ComposerState.Done).receipt
                assertEquals(taps[0].localId, receipt.localId)
                assertEquals(1, server.debits(receipt.idempotencyKey).size)
                assertEquals(1, sdk.currentTransfers.size)

                composer.newIntent()
                assertEquals(ComposerState.Editing, composer.currentState)
                assertTrue(composer.isSendEnabled)
            }
        }
    }

    @Test
    fun `train profile settles every transfer with one debit each`() = test {
        val (alice, bob) = pair()
        // The real Train profile (tunnels, 30 % of answers lost, seconds of latency, replays) on a clock
        // running 50x: its minutes of tunnels and 15 s timeouts pass in about a second.
        SendOnce.open(config(alice, clockSpeed = 50.0, retry = null)).use { sdk ->
            sdk.setNetworkProfile(NetworkProfile.Train, seed = 7)
            assertEquals(NetworkProfile.Train, sdk.networkProfile())
            val sent = (1..8).map { sdk.sendTransfer(toUserId = bob.id, amountMinor = 100L * it, currency = "BDT") }
            val outcomes = sent.map { sdk.awaitOutcome(it.localId) }
            val stats = sdk.networkStats()
            println("train: $stats, attempts ${outcomes.map { it.attempts }}")
            assertTrue(outcomes.all { it.state == TransferState.SUCCEEDED }, "all succeeded: ${outcomes.map { it.state }}")
            assertTrue(stats.requests >= 8u)
            for (t in sent) {
                assertEquals(1, server.debits(t.idempotencyKey).size, "one debit for ${t.idempotencyKey}")
            }
            assertEquals(1_000_000 - sent.sumOf { it.amountMinor }, server.balance(alice))
            // The device's view equals the server's: same server ids as the ledger's debits.
            for (t in outcomes) {
                assertEquals(t.serverTransferId, server.debits(t.idempotencyKey).single().transferId)
            }
        }
    }

    @Test
    fun `close and reopen on the same file resumes an unfinished transfer with the same key`() = test {
        val (alice, bob) = pair()
        val db = server.dbPath("reopen")
        val first = SendOnce.open(config(alice, dbPath = db, profile = NetworkProfile.Offline))
        val sent = first.sendTransfer(toUserId = bob.id, amountMinor = 777, currency = "BDT")
        // Offline: it keeps retrying and nothing reaches the server.
        first.transferUpdates(sent.localId).first { it != null && it.attempts >= 1u }
        assertFalse(first.transfer(sent.localId).state.isFinal)
        first.close()
        assertThrows<SendOnceException.Closed> { first.transfer(sent.localId) }
        assertTrue(server.debits(sent.idempotencyKey).isEmpty())

        SendOnce.open(config(alice, dbPath = db)).use { second ->
            val unfinished = second.unfinishedTransfers()
            assertEquals(listOf(sent.localId), unfinished.map { it.localId })
            // The confirm screen re-attaches to the transfer: Send stays off, the receipt arrives.
            val screen = second.composer(sent.localId)
            assertFalse(screen.isSendEnabled)
            val receipt = (screen.state.first { it is ComposerState.Done } as ComposerState.Done).receipt
            assertEquals(sent.localId, receipt.localId)
            screen.close()
            val done = second.awaitOutcome(sent.localId)
            assertEquals(TransferState.SUCCEEDED, done.state)
            assertEquals(sent.idempotencyKey, done.idempotencyKey)
            assertEquals(1, server.debits(sent.idempotencyKey).size)
            assertEquals(1, server.ledger().count { it.kind == "debit" && it.userId == alice.id })
        }
    }

    @Test
    fun `past the give-up horizon the transfer needs attention and resolve looks it up by key`() = test {
        val (alice, bob) = pair()
        val shortHorizon = fastRetry.copy(giveUpAfter = Duration.ofMillis(300))
        SendOnce.open(config(alice, profile = NetworkProfile.Offline, retry = shortHorizon)).use { sdk ->
            val sent = sdk.sendTransfer(bob.id, 42, "BDT")
            val parked = sdk.awaitOutcome(sent.localId)
            assertEquals(TransferState.NEEDS_ATTENTION, parked.state)
            assertTrue(parked.state.isSettled)
            assertFalse(parked.state.isFinal)
            // Back online: the look-up by key finds that the server never executed it; no new key, no send.
            sdk.setNetworkProfile(NetworkProfile.Off)
            val resolved = sdk.resolve(sent.localId)
            assertEquals(TransferState.FAILED, resolved.state)
            assertEquals("not_executed", resolved.rejection?.code)
            assertEquals(sent.idempotencyKey, resolved.idempotencyKey)
            assertTrue(server.debits(sent.idempotencyKey).isEmpty())
        }
    }

    @Test
    fun `a listener that throws does not crash the SDK`() = test {
        val (alice, bob) = pair()
        val calls = AtomicInteger()
        // Straight on the generated API: the exception crosses back into Rust as a ListenerError and is logged.
        val core = SendOnceCore.open(config(alice))
        try {
            core.addListener(object : TransferListener {
                override fun onTransferChanged(transfer: Transfer) {
                    calls.incrementAndGet()
                    throw IllegalStateException("listener bug")
                }
            })
            val composer = core.composer()
            composer.setListener(object : ComposerListener {
                override fun onStateChanged(state: ComposerState) {
                    calls.incrementAndGet()
                    throw RuntimeException("composer listener bug")
                }
            })
            val t = composer.confirm(TransferRequest(toUserId = bob.id, amountMinor = 10, currency = "BDT"))
            assertEquals(TransferState.SUCCEEDED, core.waitForOutcome(t.localId).state)
            val again = core.sendTransfer(TransferRequest(toUserId = bob.id, amountMinor = 11, currency = "BDT"))
            assertEquals(TransferState.SUCCEEDED, core.waitForOutcome(again.localId).state)
            assertTrue(calls.get() >= 4, "listeners were called (${calls.get()})")
            composer.close()
        } finally {
            core.shutdown()
            core.close()
        }

        // Through the idiomatic layer: the callback throws, the flows keep working.
        SendOnce.open(config(alice)).use { sdk ->
            val seen = AtomicInteger()
            sdk.addListener { seen.incrementAndGet(); throw IllegalArgumentException("boom") }
            val t = sdk.sendTransfer(toUserId = bob.id, amountMinor = 12, currency = "BDT")
            sdk.transfers.first { list -> list.any { it.localId == t.localId && it.state == TransferState.SUCCEEDED } }
            assertTrue(seen.get() >= 1)
        }
    }

    @Test
    fun `bad input surfaces as the typed exception`() = test {
        val (alice, bob) = pair()
        val db = server.dbPath()
        SendOnce.open(config(alice, dbPath = db)).use { sdk ->
            assertThrows<SendOnceException.InvalidAmount> { sdk.sendTransfer(bob.id, 0, "BDT") }
            assertThrows<SendOnceException.InvalidAmount> { sdk.sendTransfer(bob.id, -5, "BDT") }
            assertThrows<SendOnceException.InvalidCurrency> { sdk.sendTransfer(bob.id, 10, "bdt") }
            assertThrows<SendOnceException.InvalidRecipient> { sdk.sendTransfer("", 10, "BDT") }
            assertThrows<SendOnceException.InvalidNote> { sdk.sendTransfer(bob.id, 10, "BDT", "x".repeat(141)) }
            assertThrows<SendOnceException.NotFound> { sdk.transfer("no-such-id") }
            assertThrows<SendOnceException.InvalidConfig> {
                sdk.setNetworkProfile(NetworkProfile.Custom(NetsimSettings(dropRequestRate = 2.0)))
            }
            sdk.composer().use { composer ->
                assertThrows<SendOnceException.InvalidAmount> { composer.confirm(bob.id, 0, "BDT") }
                assertTrue(composer.isSendEnabled, "a refused confirm leaves Send enabled")
            }
            // The same file cannot be opened twice.
            assertThrows<SendOnceException.AlreadyOpen> { SendOnce.open(config(alice, dbPath = db)) }
            assertTrue(sdk.currentTransfers.isEmpty(), "nothing was persisted")
            // Exhaustive handling over the sealed hierarchy.
            val e: SendOnceException = assertThrows<SendOnceException> { sdk.sendTransfer(bob.id, 10, "XX") }
            val kind = when (e) {
                is SendOnceException.InvalidCurrency -> "currency"
                else -> "other"
            }
            assertEquals("currency", kind)
            assertTrue(e.message!!.contains("XX"), e.message)
        }
        assertThrows<SendOnceException.InvalidConfig> { SendOnce.open(config(alice).copy(baseUrl = "ftp://nowhere")) }
        assertThrows<SendOnceException.InvalidConfig> { SendOnce.open(config(alice).copy(requestTimeout = Duration.ZERO)) }
        assertThrows<SendOnceException.InvalidConfig> { SendOnce.open(config(alice).copy(clockSpeed = 0.0)) }
        Unit
    }

    /** A negative span is a typed InvalidConfig: uniffi's lowering threw IllegalArgumentException before checkSpans. */
    @Test
    fun `negative spans are InvalidConfig, not IllegalArgumentException`() = test {
        val (alice, _) = pair()
        val negative = Duration.ofSeconds(-1)
        assertThrows<SendOnceException.InvalidConfig> { SendOnce.open(config(alice).copy(requestTimeout = negative)) }
        assertThrows<SendOnceException.InvalidConfig> { SendOnce.shared(config(alice).copy(retention = negative)) }
        SendOnce.open(config(alice)).use { sdk ->
            assertThrows<SendOnceException.InvalidConfig> {
                sdk.setNetworkProfile(NetworkProfile.Custom(NetsimSettings(latency = negative)))
            }
            assertThrows<SendOnceException.InvalidConfig> { sdk.drain(negative) }
            assertTrue(sdk.drain(Duration.ZERO).unfinished.isEmpty(), "the SDK still works after refusing them")
        }
    }

    @Test
    fun `flows can be abandoned while changes flow`() = test {
        val (alice, bob) = pair()
        val busy = fastRetry.copy(base = Duration.ofMillis(1), cap = Duration.ofMillis(2), budgetBurst = 100_000u, budgetPerSecond = 100_000.0)
        SendOnce.open(config(alice, profile = NetworkProfile.Offline, retry = busy)).use { sdk ->
            sdk.composer().use { composer ->
                val t = composer.confirm(bob.id, 5, "BDT")
                repeat(10) { sdk.sendTransfer(bob.id, 10L + it, "BDT") }
                // Offline with a 1 ms backoff: hundreds of state changes a second while collectors come and go.
                repeat(500) {
                    sdk.transfers.first()
                    sdk.transferUpdates(t.localId).first()
                    composer.state.first()
                }
                sdk.setNetworkProfile(NetworkProfile.Off)
                for (transfer in sdk.currentTransfers) {
                    assertEquals(TransferState.SUCCEEDED, sdk.awaitOutcome(transfer.localId).state)
                }
            }
        }
    }

    @Test
    fun `the list stays whole when a slow listener makes the core drop deliveries`() = test {
        val (alice, bob) = pair()
        SendOnce.open(config(alice)).use { sdk ->
            sdk.setNetworkAvailable(false) // each transfer changes once: confirmed, PENDING
            val release = java.util.concurrent.CountDownLatch(1)
            sdk.addListener { release.await() } // holds the SDK's delivery thread: its 1,024-item buffer overflows
            val sent = (1..1_500).map { sdk.sendTransfer(toUserId = bob.id, amountMinor = it.toLong(), currency = "BDT") }
            release.countDown()
            // Without the core resending every state after a lag, the list stays short for good
            // (sdk/tests/lagging_listener.rs fails so without it).
            withTimeout(20_000) { sdk.transfers.first { it.size == sent.size } }
            assertEquals(sent.map { it.localId }.toSet(), sdk.currentTransfers.map { it.localId }.toSet())
        }
    }

    @Test
    fun `a file from a newer SDK is its own typed exception and is left untouched`() = test {
        val (alice, _) = pair()
        // The golden schema-2 file of the Rust tests, its user_version (big-endian at offset 60) set to 99.
        val golden = generateSequence(File(System.getProperty("user.dir")).absoluteFile) { it.parentFile }
            .map { File(it, "sdk/tests/golden/store-v2.db") }
            .first { it.isFile }
        val bytes = golden.readBytes().also { it[60] = 0; it[61] = 0; it[62] = 0; it[63] = 99 }
        val db = File(server.dbPath("newer")).apply { writeBytes(bytes) }
        val e = assertThrows<SendOnceException.StorageFromNewerVersion> { SendOnce.open(config(alice, dbPath = db.path)) }
        assertEquals(99L, e.found)
        assertEquals(3L, e.supported)
        assertEquals("sendonce.error.storage_from_newer_version", e.messageKey)
        assertTrue(bytes.contentEquals(db.readBytes()), "every byte as it was")
    }

    @Test
    fun `a corrupt database file is a typed exception, not a crash`() = test {
        val (alice, _) = pair()
        val db = File(server.dbPath("corrupt"))
        db.writeBytes(Random(42).nextBytes(16 * 1024))
        val e = assertThrows<SendOnceException.StorageCorrupt> { SendOnce.open(config(alice, dbPath = db.path)) }
        assertTrue(e.message!!.isNotEmpty())
        // A directory where the file should be: storage unavailable, also typed.
        val dir = File(server.dir, "a-directory.db").apply { mkdirs() }
        assertThrows<SendOnceException> { SendOnce.open(config(alice, dbPath = dir.path)) }
        // The process is still fine: a good file opens.
        SendOnce.open(config(alice)).use { assertTrue(it.currentTransfers.isEmpty()) }
    }
}
