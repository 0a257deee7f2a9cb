package io.sendonce.testing

import io.sendonce.Transfer
import io.sendonce.composerStateSendEnabled
import io.sendonce.core.Rejection
import io.sendonce.core.RejectionReason
import io.sendonce.core.RequiredAction
import io.sendonce.core.TransferState
import io.sendonce.transferStateIsFinal
import io.sendonce.transferStateIsSettled
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Test
import java.time.Instant

/**
 * The fake decides what a screen shows in Kotlin; the SDK decides it in Rust. Run with the host library
 * (its own surefire execution), this checks the two agree for every state, so the fake cannot drift.
 */
class FakeAgreesWithCoreTest {
    private fun transfer(state: TransferState, attempts: UInt, rejection: Rejection?, action: RequiredAction?) = Transfer(
        localId = "l1", idempotencyKey = "k1", toUserId = "bob", amountMinor = 5_000, currency = "BDT", note = null,
        state = state, attempts = attempts, createdAt = Instant.ofEpochMilli(1_000), updatedAt = Instant.ofEpochMilli(2_000),
        lastAttemptAt = null, nextAttemptAt = null, lastError = null, serverTransferId = null, rejection = rejection,
        replayed = false, operationType = "transfer", requiredAction = action,
    )

    @Test
    fun `the fake's composer mapping, Send rule and final and settled states are the core's`() {
        val rejections = listOf(null, Rejection(RejectionReason.InsufficientFunds, "insufficient_funds", "no", 402u))
        val actions = listOf(null, RequiredAction("SCA_REQUIRED", "https://bank.example/sca", "ch_1"))
        var checked = 0
        for (state in TransferState.entries) for (attempts in listOf(0u, 1u, 2u)) for (r in rejections) for (a in actions) {
            val t = transfer(state, attempts, r, a)
            val core = io.sendonce.composerStateOf(t)
            assertEquals(core, composerStateOf(t), "$state, $attempts attempts")
            assertEquals(composerStateSendEnabled(core), core.enablesSend, "$state")
            assertEquals(transferStateIsFinal(state), state.final, "$state")
            assertEquals(transferStateIsSettled(state), state.settled, "$state")
            checked++
        }
        assertEquals(TransferState.entries.size * 12, checked)
    }
}
