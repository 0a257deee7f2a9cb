// What an app's screens, view models and workers call, as interfaces: `SendOnce` and `Composer` implement
// them over the native core; `FakeSendOnce` (artifact io.sendonce:sendonce-kotlin-testing) implements them
// in memory, so an app's own screens are unit-tested without the native library.
package io.sendonce

import io.sendonce.core.*
import kotlinx.coroutines.flow.Flow

/**
 * The SDK as an app's code sees it. Type view models and workers against this interface, pass
 * [SendOnce.shared] (or [SendOnce.open]) in the app and `FakeSendOnce` in their unit tests.
 *
 * Every suspend call may throw [SendOnceException]; after [close] every call throws
 * [SendOnceException.Closed] and every flow completes.
 */
interface SendOnceClient : AutoCloseable {
    /** Every transfer, newest first: the current list at once, then after every change. */
    val transfers: Flow<List<Transfer>>

    /** The latest list [transfers] emitted (no I/O, never throws). */
    val currentTransfers: List<Transfer>

    /** The user confirmed: mints the key, commits the transfer durably and returns it; sending starts at once. */
    suspend fun sendTransfer(request: TransferRequest): Transfer

    /** Shorthand of [sendTransfer] with the request's fields ([amountMinor] in minor units of [currency]). */
    suspend fun sendTransfer(toUserId: String, amountMinor: Long, currency: String, note: String? = null): Transfer =
        sendTransfer(TransferRequest(toUserId = toUserId, amountMinor = amountMinor, currency = currency, note = note))

    /** The user confirmed an operation of the app's own API (build it with [operation]). */
    suspend fun sendOperation(operation: OperationRequest): Transfer

    /** The customer completed the step the server asked for (RequiresAction): sent again, same key and bytes. */
    suspend fun actionCompleted(localId: String): Transfer

    /** One transfer by local id ([SendOnceException.NotFound] if there is none). */
    suspend fun transfer(localId: String): Transfer

    /** One page of the history, newest first: up to [limit] transfers after the one with local id [after]. */
    suspend fun transfers(after: String?, limit: Int): List<Transfer>

    /** Transfers not yet final, newest first. */
    suspend fun unfinishedTransfers(): List<Transfer>

    /** One transfer as a flow of its states (distinct, from the moment of collection). */
    fun transferUpdates(localId: String): Flow<Transfer?>

    /** Suspends until the transfer is settled (final, NeedsAttention or RequiresAction). */
    suspend fun awaitOutcome(localId: String): Transfer

    /** Resolves a NeedsAttention transfer through the status look-up by key (never a new key). */
    suspend fun resolve(localId: String): Transfer

    /** The host app's connectivity signal. */
    suspend fun setNetworkAvailable(available: Boolean)

    /** Replaces the bearer token (null to forget it); transfers waiting for credentials resume. */
    suspend fun setAccessToken(token: String?)

    /** The app's lifecycle (a flag, no I/O). */
    fun setInForeground(foreground: Boolean)

    /** Train mode: switches the network simulator; [seed] makes its faults reproducible. */
    suspend fun setNetworkProfile(profile: NetworkProfile, seed: Long = 0)

    /** The network profile in force: the current one at once, then every change. */
    val networkProfiles: Flow<NetworkProfile>

    /** The profile [networkProfiles] shows now (no I/O, never throws). */
    val currentNetworkProfile: NetworkProfile

    /** Sends and resolves what is due within [deadline], then says what is left (a background worker's call). */
    suspend fun drain(deadline: kotlin.time.Duration): DrainSummary

    /** The account the store is bound to, if any. */
    suspend fun accountId(): String?

    /** Signs [accountId] in with [token] (another account's history is wiped first when nothing is unfinished). */
    suspend fun signIn(accountId: String, token: String?): WipeReport?

    /** Forgets the token and deletes every transfer and the account binding. */
    suspend fun signOut(force: Boolean = false): WipeReport

    /** A composer for one confirm screen. */
    suspend fun composer(): ComposerClient

    /** The composer of a transfer confirmed earlier (re-attach after the system killed the screen). */
    suspend fun composer(localId: String): ComposerClient

    /** The composer for a confirm screen that may have been killed: its saved local id, or null. */
    suspend fun restoreComposer(savedLocalId: String?): ComposerClient
}

/**
 * One confirm screen's state machine as a screen sees it; [Composer] implements it over the core. However
 * often Send is tapped, one intent is one transfer with one key.
 */
interface ComposerClient : AutoCloseable {
    /** What the screen shows: the current state at once, then every change. */
    val state: Flow<ComposerState>

    /** Whether the Send button is enabled; never true next to a disabling [state]. */
    val sendEnabled: Flow<Boolean>

    /** The state [state] shows now (no I/O, never throws). */
    val currentState: ComposerState

    /** Whether Send is enabled now (no I/O, never throws). */
    val isSendEnabled: Boolean

    /** The user tapped Send: the transfer of this intent (the same one for every repeated tap). */
    suspend fun confirm(request: TransferRequest): Transfer

    /** The user tapped Send on an operation of the app's own API: one key per intent. */
    suspend fun confirm(operation: OperationRequest): Transfer

    /** Shorthand of [confirm] with the request's fields. */
    suspend fun confirm(toUserId: String, amountMinor: Long, currency: String, note: String? = null): Transfer =
        confirm(TransferRequest(toUserId = toUserId, amountMinor = amountMinor, currency = currency, note = note))

    /** The transfer this screen follows, if confirmed. */
    suspend fun transfer(): Transfer?

    /** Starts a new intent ("send another"); [SendOnceException.TransferUnfinished] while one runs. */
    suspend fun newIntent()
}
