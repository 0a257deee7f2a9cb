package io.sendonce.testing

import io.sendonce.ComposerClient
import io.sendonce.ComposerState
import io.sendonce.OperationRequest
import io.sendonce.SendOnceException
import io.sendonce.Transfer
import io.sendonce.TransferRequest
import io.sendonce.core.Rejection
import io.sendonce.core.RejectionReason
import io.sendonce.core.RequiredAction
import io.sendonce.core.TransferState
import kotlinx.coroutines.flow.Flow
import kotlinx.coroutines.flow.MutableStateFlow
import kotlinx.coroutines.flow.distinctUntilChanged
import kotlinx.coroutines.flow.map
import kotlinx.coroutines.flow.takeWhile
import kotlinx.coroutines.sync.Mutex
import kotlinx.coroutines.sync.withLock

/**
 * A confirm screen over [FakeSendOnce], with the SDK's rules: one transfer per intent (a second tap returns
 * it), Send disabled from the first confirm until a definitive no, [newIntent] only once the transfer is
 * final. The state follows the fake's transfer as the test answers it ([composerStateOf]).
 */
class FakeComposer internal constructor(private val sdk: FakeSendOnce, following: String?) : ComposerClient {
    private val current = MutableStateFlow(Snapshot(following))
    private val confirming = Mutex()

    override val state: Flow<ComposerState> =
        kotlinx.coroutines.flow.combine(current, sdk.transfers) { c, _ -> c }
            .takeWhile { !it.closed }
            .map { shown(it.value) }
            .distinctUntilChanged()

    override val sendEnabled: Flow<Boolean> = state.map { it.enablesSend }.distinctUntilChanged()
    override val currentState: ComposerState get() = shown(current.value.value)
    override val isSendEnabled: Boolean get() = currentState.enablesSend

    override suspend fun confirm(request: TransferRequest): Transfer = confirmWith { sdk.sendTransfer(request) }

    override suspend fun confirm(operation: OperationRequest): Transfer = confirmWith { sdk.sendOperation(operation) }

    private suspend fun confirmWith(send: suspend () -> Transfer): Transfer = confirming.withLock {
        live()
        current.value.value?.let { id ->
            val existing = sdk.get(id)
            if (!composerStateOf(existing).enablesSend) return existing
        }
        send().also { current.value = Snapshot(it.localId) }
    }

    override suspend fun transfer(): Transfer? = live().let { current.value.value?.let(sdk::get) }

    override suspend fun newIntent() {
        live()
        val t = current.value.value?.let(sdk::get)
        if (t != null && !t.state.final) throw SendOnceException.TransferUnfinished()
        current.value = Snapshot(null)
    }

    override fun close() {
        current.value = current.value.copy(closed = true)
    }

    private fun shown(localId: String?): ComposerState =
        localId?.let { id -> sdk.currentTransfers.firstOrNull { it.localId == id } }
            ?.let(::composerStateOf) ?: ComposerState.Editing

    private fun live() {
        if (current.value.closed) throw SendOnceException.Closed()
    }
}

/**
 * What a confirm screen following [t] shows: the same mapping as the core's `ComposerState::of` (a test of
 * this artifact checks the two agree for every state, through the native library).
 */
fun composerStateOf(t: Transfer): ComposerState = when (t.state) {
    TransferState.PENDING -> ComposerState.Submitting(t)
    TransferState.SENDING -> if (t.attempts <= 1u) ComposerState.Submitting(t) else ComposerState.Waiting(t, false)
    TransferState.RETRYING -> ComposerState.Waiting(t, false)
    TransferState.AUTH_REQUIRED -> ComposerState.Waiting(t, true)
    TransferState.SUCCEEDED -> ComposerState.Done(t)
    TransferState.REJECTED, TransferState.FAILED ->
        ComposerState.Rejected(t.rejection ?: Rejection(RejectionReason.Other("unknown"), "unknown", "", 0u), t)
    TransferState.NEEDS_ATTENTION -> ComposerState.NeedsAttention(t)
    TransferState.REQUIRES_ACTION ->
        ComposerState.RequiresAction(t, t.requiredAction ?: RequiredAction("unknown", null, null))
}

/** Send is enabled while editing and after a definitive no (the core's `ComposerState::send_enabled`). */
internal val ComposerState.enablesSend: Boolean
    get() = this is ComposerState.Editing || this is ComposerState.Rejected
