package io.sendonce

import kotlinx.coroutines.flow.Flow
import kotlinx.coroutines.flow.MutableStateFlow
import kotlinx.coroutines.flow.StateFlow
import kotlinx.coroutines.flow.asStateFlow
import kotlinx.coroutines.flow.distinctUntilChanged
import kotlinx.coroutines.flow.map
import java.lang.ref.WeakReference
import java.util.concurrent.CopyOnWriteArrayList
import java.util.concurrent.atomic.AtomicBoolean

/**
 * The sendonce SDK: one per database file. It sends in the background on its own threads; a transfer
 * confirmed here is sent, with one idempotency key, until the server gives a definitive answer, across
 * restarts of the app.
 *
 * ```
 * SendOnce.open(SendOnceConfig(baseUrl = "https://api.example.com", dbPath = dbFile.path, accessToken = AccessToken(token))).use { sdk ->
 *     val transfer = sdk.sendTransfer(TransferRequest(toUserId = "usr_42", amountMinor = 50_000, currency = "BDT"))
 *     val outcome = sdk.awaitOutcome(transfer.localId)
 * }
 * ```
 *
 * Every call may throw [SendOnceException]; after [close] every call throws [SendOnceException.Closed].
 */
class SendOnce private constructor(private val core: SendOnceCore, private val sharedKey: String? = null) : AutoCloseable {
    companion object {
        private val instances = HashMap<String, SendOnce>()

        /** Opens the file, recovers every unfinished transfer and resumes sending. */
        @JvmStatic
        @Throws(SendOnceException::class)
        fun open(config: SendOnceConfig): SendOnce = SendOnce(SendOnceCore.open(config))

        /** [open] with the app's token provider and HTTP stack (e.g. [OkHttpTransport]). */
        @JvmStatic
        @Throws(SendOnceException::class)
        fun open(config: SendOnceConfig, tokenProvider: AccessTokenProvider?, transport: HttpTransport?): SendOnce =
            SendOnce(SendOnceCore.openWith(config, tokenProvider, transport))

        /**
         * The process's one instance on [SendOnceConfig.dbPath], for the UI, a WorkManager worker and a push
         * handler alike: the same object on every call (never `AlreadyOpen`) until it is closed. Another
         * process holding the file (a `:worker` process) throws [SendOnceException.Busy]: retry later.
         * [tokenProvider] and [transport] are used by the call that opens it.
         */
        @JvmStatic
        @JvmOverloads
        @Throws(SendOnceException::class)
        fun shared(config: SendOnceConfig, tokenProvider: AccessTokenProvider? = null, transport: HttpTransport? = null): SendOnce {
            val key = java.io.File(config.dbPath).canonicalPath
            synchronized(instances) {
                instances[key]?.takeIf { !it.closed.get() }?.let { return it }
                val sdk = SendOnce(SendOnceCore.sharedWith(config, tokenProvider, transport), key)
                instances[key] = sdk
                return sdk
            }
        }

        /** Wipes a file no instance has open; `Busy` if one has, `UnfinishedTransfers` unless [force]. */
        @JvmStatic
        @Throws(SendOnceException::class)
        fun wipe(dbPath: String, force: Boolean = false): WipeReport = io.sendonce.wipe(dbPath, force)

        /** Version of the Rust core. */
        @JvmStatic
        val version: String get() = sdkVersion()
    }

    private val closed = AtomicBoolean(false)
    private val refreshLock = Any()
    private val _transfers = MutableStateFlow<List<Transfer>>(emptyList())
    private val callbacks = CopyOnWriteArrayList<(Transfer) -> Unit>()
    private val listenerId: ULong

    /** Every transfer, newest first, updated at every change (read from the SDK's store, never merged here). */
    val transfers: StateFlow<List<Transfer>> = _transfers.asStateFlow()

    init {
        listenerId = core.addListener(Relay(WeakReference(this)))
        refreshTransfers()
    }

    /** The user confirmed: mints the key, commits the transfer durably and returns it; sending starts at once. */
    @Throws(SendOnceException::class)
    suspend fun sendTransfer(request: TransferRequest): Transfer = live { core.sendTransfer(request) }

    /** Shorthand of [sendTransfer] with the request's fields. */
    @Throws(SendOnceException::class)
    suspend fun sendTransfer(toUserId: String, amountMinor: Long, currency: String, note: String? = null): Transfer =
        sendTransfer(TransferRequest(toUserId = toUserId, amountMinor = amountMinor, currency = currency, note = note))

    /** One transfer by local id. */
    @Throws(SendOnceException::class)
    fun transfer(localId: String): Transfer = live { core.transfer(localId) }

    /** Transfers not yet final, newest first. */
    @Throws(SendOnceException::class)
    fun unfinishedTransfers(): List<Transfer> = live { core.unfinishedTransfers() }

    /** One transfer as a flow of its states (distinct, from the moment of collection). */
    fun transferUpdates(localId: String): Flow<Transfer?> =
        transfers.map { list -> list.firstOrNull { it.localId == localId } }.distinctUntilChanged()

    /** Suspends until the transfer is settled (final, or handed to the user as NeedsAttention). */
    @Throws(SendOnceException::class)
    suspend fun awaitOutcome(localId: String): Transfer = live { core.waitForOutcome(localId) }

    /** Resolves a NeedsAttention transfer now through the status look-up by key (never a new key). */
    @Throws(SendOnceException::class)
    suspend fun resolve(localId: String): Transfer = live { core.resolve(localId) }

    /**
     * Calls [listener] at every change of any transfer, on an SDK thread. An exception thrown by it is
     * caught and ignored. Close the returned handle to unregister.
     */
    fun addListener(listener: (Transfer) -> Unit): AutoCloseable {
        callbacks.add(listener)
        return AutoCloseable { callbacks.remove(listener) }
    }

    /** The host app's connectivity signal; `true` wakes every waiting retry at once. */
    @Throws(SendOnceException::class)
    fun setNetworkAvailable(available: Boolean) = live { core.setNetworkAvailable(available) }

    /** Replaces the bearer token (null to forget it); transfers waiting for credentials resume. */
    @Throws(SendOnceException::class)
    fun setAccessToken(token: String?) = live { core.setAccessToken(token) }

    /** Train mode: switches the network simulator at run time; [seed] makes the faults reproducible. */
    @Throws(SendOnceException::class)
    fun setNetworkProfile(profile: NetworkProfile, seed: Long = 0) = live { core.setNetworkProfile(profile, seed.toULong()) }

    /** The network profile in force. */
    val networkProfile: NetworkProfile get() = live { core.networkProfile() }

    /** What the network simulator did so far. */
    val networkStats: NetsimStats get() = live { core.networkStats() }

    /**
     * Sends and resolves everything due within [deadline], then says what is left: what a WorkManager
     * `CoroutineWorker.doWork()` turns into `Result.success()` / `retry()`. Returns by the deadline even with
     * a request out; nothing is lost, it goes on with the same key.
     */
    @Throws(SendOnceException::class)
    suspend fun drain(deadline: kotlin.time.Duration): DrainSummary =
        live { core.drain(deadline.inWholeMilliseconds) }.also { refreshTransfers() }

    /** The app's lifecycle: in the background, network wake-ups are spread (see the README). */
    @Throws(SendOnceException::class)
    fun setInForeground(foreground: Boolean) = live { core.setInForeground(foreground) }

    /** The account the store is bound to, if any. */
    val accountId: String? get() = live { core.accountId() }

    /**
     * Signs [accountId] in with [token]. Another account than the bound one throws
     * [SendOnceException.AccountMismatch] while it has unfinished transfers; with none, its history is wiped
     * first (the report says what).
     */
    @Throws(SendOnceException::class)
    fun signIn(accountId: String, token: String?): WipeReport? = live { core.signIn(accountId, token) }.also { refreshTransfers() }

    /**
     * Forgets the token and deletes every transfer and the account binding. Throws
     * [SendOnceException.UnfinishedTransfers] while any is unfinished, unless [force]; the report lists what
     * was discarded.
     */
    @Throws(SendOnceException::class)
    fun signOut(force: Boolean = false): WipeReport = live { core.signOut(force) }.also { refreshTransfers() }

    /**
     * Calls [listener] with every [SdkEvent] (attempts, answers, retries, outcomes, wipes), on an SDK thread;
     * close the handle to unregister. Events carry local ids only, never a recipient, note or token.
     */
    fun addEventListener(listener: (SdkEvent) -> Unit): AutoCloseable {
        val id = live {
            core.addEventListener(object : EventListener {
                override fun onEvent(event: SdkEvent) {
                    try {
                        listener(event)
                    } catch (e: Throwable) {
                        if (e is VirtualMachineError) throw e
                    }
                }
            })
        }
        return AutoCloseable { if (!closed.get()) core.removeListener(id) }
    }

    /** A composer for one confirm screen. */
    @Throws(SendOnceException::class)
    fun composer(): Composer = live { Composer(core.composer()) }

    /** A composer re-attached to a transfer confirmed earlier (after the app was killed). */
    @Throws(SendOnceException::class)
    fun composer(localId: String): Composer = live { Composer(core.composerFor(localId)) }

    /**
     * Stops sending and releases the file. Nothing is lost: a request cut off here is sent again, with the
     * same key, on the next [open]. Safe to call twice.
     */
    override fun close() {
        if (!closed.compareAndSet(false, true)) return
        sharedKey?.let { key -> synchronized(instances) { if (instances[key] === this) instances.remove(key) } }
        callbacks.clear()
        try {
            core.removeListener(listenerId)
            core.shutdown()
        } finally {
            core.close() // frees the native handle
        }
    }

    private fun refreshTransfers() {
        if (closed.get()) return
        try {
            synchronized(refreshLock) { _transfers.value = core.transfers() }
        } catch (_: SendOnceException) {
            // Closed meanwhile: the last list stays.
        } catch (_: IllegalStateException) {
            // The native handle was freed by close().
        }
    }

    private fun onChanged(transfer: Transfer) {
        refreshTransfers()
        for (callback in callbacks) {
            try {
                callback(transfer)
            } catch (e: Throwable) {
                if (e is VirtualMachineError) throw e
                // A listener's failure is its own; the SDK carries on.
            }
        }
    }

    private inline fun <T> live(block: () -> T): T {
        if (closed.get()) throw SendOnceException.Closed("the SDK is closed")
        try {
            return block()
        } catch (e: IllegalStateException) {
            // uniffi's "object has already been destroyed": close() won a race with this call.
            if (closed.get()) throw SendOnceException.Closed("the SDK is closed")
            throw e
        }
    }

    /** Holds the SDK weakly: the native side keeps the listener alive, it must not keep the SDK alive. */
    private class Relay(private val sdk: WeakReference<SendOnce>) : TransferListener {
        override fun onTransferChanged(transfer: Transfer) {
            try {
                sdk.get()?.onChanged(transfer)
            } catch (e: Throwable) {
                if (e is VirtualMachineError) throw e
            }
        }
    }
}
