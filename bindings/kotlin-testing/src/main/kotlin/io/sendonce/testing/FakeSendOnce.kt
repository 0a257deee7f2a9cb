// An in-memory SendOnceClient for an app's unit tests: no native library, no disk, no network. The test
// plays the server: it answers each confirmed transfer (succeed, reject, ask for a step, ...) when it wants.
package io.sendonce.testing

import io.sendonce.ComposerClient
import io.sendonce.DrainSummary
import io.sendonce.NetworkProfile
import io.sendonce.OperationRequest
import io.sendonce.SendOnceClient
import io.sendonce.SendOnceException
import io.sendonce.Transfer
import io.sendonce.TransferRequest
import io.sendonce.WipeReport
import io.sendonce.core.Rejection
import io.sendonce.core.RejectionReason
import io.sendonce.core.RequiredAction
import io.sendonce.core.TransferState
import kotlinx.coroutines.flow.Flow
import kotlinx.coroutines.flow.MutableStateFlow
import kotlinx.coroutines.flow.distinctUntilChanged
import kotlinx.coroutines.flow.first
import kotlinx.coroutines.flow.map
import kotlinx.coroutines.flow.takeWhile
import java.time.Instant
import java.util.UUID
import java.util.concurrent.atomic.AtomicBoolean
import java.util.concurrent.atomic.AtomicLong

/**
 * The SDK for an app's unit tests, in memory and without the native library: confirmed transfers wait in
 * PENDING until the test answers them ([succeed], [reject], [fail], [retrying], [requireAction],
 * [needsAttention], [authRequired]), or [onSend] answers each as it is confirmed. Keys, local ids and the
 * composer behave as the SDK's: one key per transfer, kept across every state; a second tap returns the same
 * transfer; Send stays disabled until a definitive no.
 *
 * What needs the native library even here: printing a [Transfer] (its `toString` hides the recipient in
 * Rust) and the extension helpers decided in Rust (`ComposerState.sendEnabled`, `TransferState.isFinal`);
 * a screen reads [ComposerClient.isSendEnabled] / [ComposerClient.sendEnabled] instead.
 */
class FakeSendOnce(private val clock: () -> Instant = Instant::now) : SendOnceClient {
    private val closed = AtomicBoolean(false)
    private val ids = AtomicLong(0)
    // A closed flag inside the value: a StateFlow never re-emits an equal value, and close() must end them.
    private val list = MutableStateFlow(Snapshot(emptyList<Transfer>()))
    private val profile = MutableStateFlow(Snapshot<NetworkProfile>(NetworkProfile.Off))

    /** Called with every transfer as it is confirmed (after it is stored): answer it here, or later. */
    var onSend: (FakeSendOnce.(Transfer) -> Unit)? = null

    /** Every transfer and operation request confirmed, in order (each once, however often Send was tapped). */
    val confirmed: List<Transfer> get() = list.value.value.reversed()

    /** The last connectivity signal, lifecycle flag and token the app gave. */
    @Volatile var networkAvailable: Boolean? = null
        private set
    @Volatile var inForeground: Boolean? = null
        private set
    @Volatile var accessToken: String? = null
        private set

    override val transfers: Flow<List<Transfer>> = list.takeWhile { !it.closed }.map { it.value }
    override val currentTransfers: List<Transfer> get() = list.value.value
    override val networkProfiles: Flow<NetworkProfile> = profile.takeWhile { !it.closed }.map { it.value }
    override val currentNetworkProfile: NetworkProfile get() = profile.value.value

    override suspend fun sendTransfer(request: TransferRequest): Transfer {
        if (request.amountMinor <= 0) throw SendOnceException.InvalidAmount("amount_minor must be positive")
        return store("transfer", request.toUserId, request.amountMinor, request.currency, request.note)
    }

    override suspend fun sendOperation(operation: OperationRequest): Transfer =
        store(operation.operationType, operation.counterparty, operation.amountMinor, operation.currency, operation.note)

    private fun store(type: String, to: String, amount: Long, currency: String, note: String?): Transfer {
        live()
        val now = clock()
        val t = Transfer(
            localId = "fake-${ids.incrementAndGet()}", idempotencyKey = UUID.randomUUID().toString(),
            toUserId = to, amountMinor = amount, currency = currency, note = note, state = TransferState.PENDING,
            attempts = 0u, createdAt = now, updatedAt = now, lastAttemptAt = null, nextAttemptAt = null,
            lastError = null, serverTransferId = null, rejection = null, replayed = false, operationType = type,
            requiredAction = null,
        )
        put(t)
        onSend?.invoke(this, t)
        return get(t.localId)
    }

    /** The server moved the money. */
    fun succeed(localId: String, serverTransferId: String = "srv-$localId") =
        answer(localId, TransferState.SUCCEEDED) { it.copy(serverTransferId = serverTransferId, requiredAction = null) }

    /** A definitive no (nothing moved). */
    fun reject(localId: String, reason: RejectionReason, code: String = "rejected", httpStatus: UShort = 402u) =
        answer(localId, TransferState.REJECTED) { it.copy(rejection = Rejection(reason, code, "", httpStatus)) }

    /** Failed for good (a key reused with another body, or never executed per the look-up). */
    fun fail(localId: String, reason: RejectionReason = RejectionReason.NotExecuted, code: String = "not_executed") =
        answer(localId, TransferState.FAILED) { it.copy(rejection = Rejection(reason, code, "", 0u)) }

    /** The outcome is unknown so far; the SDK would try again with the same key. */
    fun retrying(localId: String, attempts: UInt = 1u, lastError: String = "timeout") =
        answer(localId, TransferState.RETRYING) { it.copy(attempts = attempts, lastError = lastError) }

    /** The server asks the customer for a step (3-D Secure, SCA); parked until [actionCompleted]. */
    fun requireAction(localId: String, action: RequiredAction) =
        answer(localId, TransferState.REQUIRES_ACTION) { it.copy(requiredAction = action) }

    /** The SDK stopped sending at its horizon; the outcome is resolved by look-up, never by a new key. */
    fun needsAttention(localId: String) = answer(localId, TransferState.NEEDS_ATTENTION) { it }

    /** The server refused the credentials; waits for [setAccessToken]. */
    fun authRequired(localId: String) = answer(localId, TransferState.AUTH_REQUIRED) { it }

    private fun answer(localId: String, state: TransferState, change: (Transfer) -> Transfer): Transfer {
        val t = change(get(localId)).copy(state = state, updatedAt = clock())
        put(t)
        return t
    }

    override suspend fun actionCompleted(localId: String): Transfer {
        live()
        val t = get(localId)
        if (t.state != TransferState.REQUIRES_ACTION) return t
        return answer(localId, TransferState.PENDING) { it.copy(requiredAction = null) }
    }

    override suspend fun transfer(localId: String): Transfer = live().let { get(localId) }

    override suspend fun transfers(after: String?, limit: Int): List<Transfer> {
        live()
        require(limit >= 0) { "limit must not be negative" }
        val all = list.value.value
        val from = if (after == null) 0 else all.indexOfFirst { it.localId == after }
            .also { if (it < 0) throw SendOnceException.NotFound(after) } + 1
        return all.drop(from).take(minOf(limit, 500))
    }

    override suspend fun unfinishedTransfers(): List<Transfer> = live().let { list.value.value.filterNot { it.state.final } }

    override fun transferUpdates(localId: String): Flow<Transfer?> =
        transfers.map { l -> l.firstOrNull { it.localId == localId } }.distinctUntilChanged()

    override suspend fun awaitOutcome(localId: String): Transfer {
        live()
        get(localId)
        val seen = list.first { snap -> snap.closed || snap.value.first { it.localId == localId }.state.settled }
        live()
        return seen.value.first { it.localId == localId }
    }

    /** The look-up: a NeedsAttention transfer stays so until the test answers it. */
    override suspend fun resolve(localId: String): Transfer = live().let { get(localId) }

    override suspend fun setNetworkAvailable(available: Boolean) { live(); networkAvailable = available }

    override suspend fun setAccessToken(token: String?) {
        live()
        accessToken = token
        list.value.value.filter { it.state == TransferState.AUTH_REQUIRED }
            .forEach { answer(it.localId, TransferState.PENDING) { t -> t } }
    }

    override fun setInForeground(foreground: Boolean) { live(); inForeground = foreground }

    override suspend fun setNetworkProfile(profile: NetworkProfile, seed: Long) { live(); this.profile.value = Snapshot(profile) }

    /** Nothing is sent here: says what is unfinished, as the SDK's drain would after its deadline. */
    override suspend fun drain(deadline: kotlin.time.Duration): DrainSummary {
        live()
        val (done, open) = list.value.value.partition { it.state.final }
        return DrainSummary(finished = done, unfinished = open, nextAttemptAt = null, nextAttemptIn = null, deadlineReached = false)
    }

    @Volatile private var account: String? = null

    override suspend fun accountId(): String? = live().let { account }

    override suspend fun signIn(accountId: String, token: String?): WipeReport? {
        live()
        val bound = account
        accessToken = token
        if (bound == null || bound == accountId) {
            account = accountId
            return null
        }
        if (list.value.value.any { !it.state.final }) {
            throw SendOnceException.AccountMismatch("bound to $bound, which has unfinished transfers")
        }
        account = accountId
        return wipe(force = false)
    }

    override suspend fun signOut(force: Boolean): WipeReport {
        live()
        val unfinished = list.value.value.count { !it.state.final }
        if (!force && unfinished > 0) throw SendOnceException.UnfinishedTransfers(unfinished.toUInt())
        accessToken = null
        account = null
        return wipe(force)
    }

    private fun wipe(force: Boolean): WipeReport {
        val (done, open) = list.value.value.partition { it.state.final }
        list.value = Snapshot(emptyList())
        return WipeReport(discardedUnfinished = if (force) open else emptyList(), deletedFinished = done.size.toUInt())
    }

    override suspend fun composer(): ComposerClient = live().let { FakeComposer(this, null) }

    override suspend fun composer(localId: String): ComposerClient = live().let { FakeComposer(this, get(localId).localId) }

    override suspend fun restoreComposer(savedLocalId: String?): ComposerClient {
        live()
        val all = list.value.value
        val saved = savedLocalId?.let { id -> all.firstOrNull { it.localId == id } }
        val follow = saved ?: all.firstOrNull { !it.state.final }
        return FakeComposer(this, follow?.localId)
    }

    /** Ends every flow; later calls throw [SendOnceException.Closed]. */
    override fun close() {
        if (!closed.compareAndSet(false, true)) return
        list.value = list.value.copy(closed = true)
        profile.value = profile.value.copy(closed = true)
    }

    internal fun get(localId: String): Transfer =
        list.value.value.firstOrNull { it.localId == localId } ?: throw SendOnceException.NotFound(localId)

    private fun put(t: Transfer) {
        synchronized(list) {
            if (closed.get()) return
            val l = list.value.value.filterNot { it.localId == t.localId } + t
            list.value = Snapshot(l.sortedByDescending { it.localId.removePrefix("fake-").toLong() }) // newest first
        }
    }

    private fun live() {
        if (closed.get()) throw SendOnceException.Closed()
    }
}

/** A flow's value and whether the fake was closed (then the flows complete). */
internal data class Snapshot<T>(val value: T, val closed: Boolean = false)

/** Final: nothing more will happen (the core's `TransferState::is_final`). */
internal val TransferState.final: Boolean
    get() = this == TransferState.SUCCEEDED || this == TransferState.REJECTED || this == TransferState.FAILED

/** Settled: final, or handed to the user (the core's `TransferState::is_settled`). */
internal val TransferState.settled: Boolean
    get() = final || this == TransferState.NEEDS_ATTENTION || this == TransferState.REQUIRES_ACTION
