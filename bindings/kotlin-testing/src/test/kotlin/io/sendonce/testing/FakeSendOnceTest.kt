package io.sendonce.testing

import io.sendonce.ComposerClient
import io.sendonce.ComposerState
import io.sendonce.SendOnceClient
import io.sendonce.SendOnceException
import io.sendonce.core.RejectionReason
import io.sendonce.core.RequiredAction
import io.sendonce.core.TransferState
import kotlinx.coroutines.async
import kotlinx.coroutines.flow.first
import kotlinx.coroutines.flow.toList
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertNotEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows

/**
 * An app's screen tested with the fake, as an app team would: this JVM has no native library on any path
 * (the first test is the control), so everything here runs on the fake alone.
 */
class FakeSendOnceTest {
    /** What an app writes: a pay screen over the SDK's interfaces, not over the native classes. */
    class PayScreen(private val sdk: SendOnceClient) {
        lateinit var composer: ComposerClient
        suspend fun open(saved: String?) { composer = sdk.restoreComposer(saved) }
        suspend fun tapSend() = composer.confirm(toUserId = "bob", amountMinor = 5_000, currency = "BDT")
        val sendButtonEnabled get() = composer.isSendEnabled
    }

    @Test
    fun `this JVM has no native library, so the tests below run on the fake alone`() {
        val e = assertThrows<Throwable> { io.sendonce.sdkVersion() }
        val chain = generateSequence(e) { it.cause }.toList()
        assertTrue(chain.any { it is LinkageError }, "expected the native library to be missing: $chain")
    }

    @Test
    fun `repeated taps are one transfer with one key, and Send stays off until the answer`() = runBlocking<Unit> {
        val sdk = FakeSendOnce()
        val screen = PayScreen(sdk).apply { open(null) }
        assertTrue(screen.sendButtonEnabled)
        val first = screen.tapSend()
        assertFalse(screen.sendButtonEnabled)
        val again = screen.tapSend()
        assertEquals(first.localId, again.localId)
        assertEquals(first.idempotencyKey, again.idempotencyKey)
        assertEquals(1, sdk.confirmed.size)
        assertTrue(screen.composer.currentState is ComposerState.Submitting)

        sdk.retrying(first.localId, attempts = 2u)
        assertEquals(ComposerState.Waiting(sdk.transfer(first.localId), false), screen.composer.currentState)
        sdk.succeed(first.localId, serverTransferId = "tr_1")
        val done = withTimeout(5_000) { screen.composer.state.first { it is ComposerState.Done } } as ComposerState.Done
        assertEquals("tr_1", done.receipt.serverTransferId)
        assertEquals(first.idempotencyKey, done.receipt.idempotencyKey)
        assertFalse(screen.sendButtonEnabled, "after Done, Send stays off until a new intent")
        assertEquals(TransferState.SUCCEEDED, sdk.awaitOutcome(first.localId).state)

        screen.composer.newIntent()
        assertTrue(screen.sendButtonEnabled)
        assertNotEquals(first.idempotencyKey, screen.tapSend().idempotencyKey)
    }

    @Test
    fun `a definitive no enables Send again and the next tap is a new intent with a new key`() = runBlocking<Unit> {
        val sdk = FakeSendOnce()
        val composer = sdk.composer()
        val t = composer.confirm(toUserId = "bob", amountMinor = 5_000, currency = "BDT")
        sdk.reject(t.localId, RejectionReason.InsufficientFunds, code = "insufficient_funds")
        val shown = composer.currentState as ComposerState.Rejected
        assertEquals(RejectionReason.InsufficientFunds, shown.reason.reason)
        assertTrue(composer.isSendEnabled)
        val next = composer.confirm(toUserId = "bob", amountMinor = 500, currency = "BDT")
        assertNotEquals(t.idempotencyKey, next.idempotencyKey)
        assertEquals(2, sdk.confirmed.size)
    }

    @Test
    fun `a step-up answer parks the transfer, a tap returns it, actionCompleted resumes it under its key`() = runBlocking<Unit> {
        val sdk = FakeSendOnce()
        val composer = sdk.composer()
        val t = composer.confirm(toUserId = "bob", amountMinor = 5_000, currency = "BDT")
        sdk.requireAction(t.localId, RequiredAction(code = "SCA_REQUIRED", url = "https://bank.example/sca", challengeId = "ch_1"))
        val parked = sdk.awaitOutcome(t.localId)
        assertEquals(TransferState.REQUIRES_ACTION, parked.state)
        assertEquals("ch_1", (composer.currentState as ComposerState.RequiresAction).action.challengeId)
        assertEquals(t.localId, composer.confirm(toUserId = "bob", amountMinor = 5_000, currency = "BDT").localId)
        assertFalse(composer.isSendEnabled)
        val resumed = sdk.actionCompleted(t.localId)
        assertEquals(TransferState.PENDING, resumed.state)
        assertEquals(t.idempotencyKey, resumed.idempotencyKey)
        assertThrows<SendOnceException.TransferUnfinished> { runBlocking { composer.newIntent() } }
    }

    @Test
    fun `onSend answers each transfer as it is confirmed, and a restored screen follows the unfinished one`() = runBlocking<Unit> {
        val sdk = FakeSendOnce().apply { onSend = { if (it.amountMinor > 10_000) needsAttention(it.localId) else succeed(it.localId) } }
        assertEquals(TransferState.SUCCEEDED, sdk.awaitOutcome(sdk.sendTransfer("bob", 5_000, "BDT").localId).state)
        val big = sdk.sendTransfer("bob", 50_000, "BDT")
        assertEquals(TransferState.NEEDS_ATTENTION, sdk.awaitOutcome(big.localId).state)
        val restored = sdk.restoreComposer(null)
        assertEquals(ComposerState.NeedsAttention(sdk.transfer(big.localId)), restored.currentState)
        assertEquals(listOf(big.localId), sdk.unfinishedTransfers().map { it.localId })
        assertEquals(listOf(big.localId), sdk.transfers(after = null, limit = 1).map { it.localId })
        assertEquals(1, sdk.transfers(after = big.localId, limit = 10).size)
        assertThrows<SendOnceException.InvalidAmount> { runBlocking { sdk.sendTransfer("bob", 0, "BDT") } }
    }

    @Test
    fun `close ends every flow and later calls throw Closed`() = runBlocking<Unit> {
        val sdk = FakeSendOnce()
        sdk.sendTransfer("bob", 5_000, "BDT")
        val seen = async { sdk.transfers.toList() }
        kotlinx.coroutines.yield()
        sdk.close()
        assertEquals(1, withTimeout(5_000) { seen.await() }.last().size)
        assertThrows<SendOnceException.Closed> { runBlocking { sdk.sendTransfer("bob", 5_000, "BDT") } }
    }
}
