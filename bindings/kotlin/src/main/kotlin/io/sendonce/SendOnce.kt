package io.sendonce

import io.sendonce.wipe as wipeFile
import kotlinx.coroutines.CoroutineDispatcher
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.flow.Flow
import kotlinx.coroutines.flow.MutableStateFlow
import kotlinx.coroutines.flow.distinctUntilChanged
import kotlinx.coroutines.flow.map
import kotlinx.coroutines.withContext
import java.lang.ref.WeakReference
import java.util.Collections
import java.util.WeakHashMap
import java.util.concurrent.CopyOnWriteArrayList
import java.util.concurrent.atomic.AtomicBoolean
import io.sendonce.core.*

/**
 * The sendonce SDK: one per database file. It sends in the background on its own threads; a transfer
 * confirmed here is sent, with one idempotency key, until the server gives a definitive answer, across
 * restarts of the app.
 *
 * Main-safe: every call that touches the disk or the network is `suspend` and runs on [io] (default
 * `Dispatchers.IO`), so calling it from `Dispatchers.Main` never blocks the UI on an fsync.
 *
 * ```
 * val sdk = SendOnce.open(SendOnceConfig(baseUrl = "https://api.example.com", dbPath = dbFile.path, accessToken = AccessToken(token)))
 * val transfer = sdk.sendTransfer(TransferRequest(toUserId = "usr_42", amountMinor = 50_000, currency = "BDT"))
 * val outcome = sdk.awaitOutcome(transfer.localId)
 * sdk.close()
 * ```
 *
 * Amounts are `Long` minor units of the currency (paisa for BDT: `50_000` is 500.00 BDT), from 1 to
 * [maxAmountMinor]. Every call may throw [SendOnceException]; after [close] every call throws
 * [SendOnceException.Closed] and every flow completes.
 */
class SendOnce private constructor(
    private val core: SendOnceCore,
    private val io: CoroutineDispatcher,
    private val sharedKey: String? = null,
    private val openedWith: SharedSettings? = null,
) : SendOnceClient {
    companion object {
        private val instances = HashMap<String, SendOnce>()

        /**
         * The platform's HTTP stack, one per process: what [open] and [shared] use when the app passes no
         * transport and the native core has no HTTP stack of its own (the Android build), so the device's
         * trust settings (Network Security Config, user and MDM CAs) and proxies apply.
         */
        private val platformTransport: HttpTransport by lazy { OkHttpTransport(okhttp3.OkHttpClient()) }

        /** The transport to open with: the app's, else the platform's when the core has none built in. */
        internal fun effectiveTransport(given: HttpTransport?, builtIn: Boolean = hasBuiltInTransport()): HttpTransport? =
            given ?: if (builtIn) null else platformTransport

        /** Opens the file (on [io]), recovers every unfinished transfer and resumes sending. */
        @JvmStatic
        @Throws(SendOnceException::class)
        suspend fun open(config: SendOnceConfig, io: CoroutineDispatcher = Dispatchers.IO): SendOnce {
            config.checkSpans()
            return withContext(io) {
                val core = effectiveTransport(null)?.let { SendOnceCore.openWith(config, null, it) } ?: SendOnceCore.open(config)
                SendOnce(core, io).also { it.start() }
            }
        }

        /** [open] with the app's token provider and HTTP stack (e.g. [OkHttpTransport]). */
        @JvmStatic
        @Throws(SendOnceException::class)
        suspend fun open(
            config: SendOnceConfig,
            tokenProvider: AccessTokenProvider?,
            transport: HttpTransport?,
            io: CoroutineDispatcher = Dispatchers.IO,
        ): SendOnce {
            config.checkSpans()
            val effective = effectiveTransport(transport)
            return withContext(io) { SendOnce(SendOnceCore.openWith(config, tokenProvider, effective), io).also { it.start() } }
        }

        /**
         * The process's one instance on [SendOnceConfig.dbPath], for the UI, a WorkManager worker and a push
         * handler alike: the same object on every call (never `AlreadyOpen`). Each call is one claim, released
         * by one [close]: the instance closes when every caller has closed it, so the UI leaving never stops a
         * worker's send. Another process holding the file (a `:worker` process) throws [SendOnceException.Busy].
         *
         * Every call must configure it the same way: another base URL or setting, or another [tokenProvider]
         * or [transport] object, throws [SendOnceException.InvalidConfig] instead of being silently dropped
         * (configure it once, at application start). Not compared: the access token (a caller may hold a
         * fresher one) and the starting network profile. [io] is the opening call's.
         */
        @JvmStatic
        @Throws(SendOnceException::class)
        suspend fun shared(
            config: SendOnceConfig,
            tokenProvider: AccessTokenProvider? = null,
            transport: HttpTransport? = null,
            io: CoroutineDispatcher = Dispatchers.IO,
        ): SendOnce {
            config.checkSpans()
            val transport = effectiveTransport(transport)
            return withContext(io) {
                val key = java.io.File(config.dbPath).canonicalPath
                val wanted = SharedSettings(config, tokenProvider, transport)
                synchronized(instances) {
                    instances[key]?.takeIf { !it.closed.get() }?.let { return@withContext it.claim(wanted) }
                    SendOnce(SendOnceCore.sharedWith(config, tokenProvider, transport), io, key, wanted)
                        .also { it.start(); instances[key] = it }
                }
            }
        }

        /** Wipes (on [io]) a file no instance has open; `Busy` if one has, `UnfinishedTransfers` unless [force]. */
        @JvmStatic
        @Throws(SendOnceException::class)
        suspend fun wipe(dbPath: String, force: Boolean = false, io: CoroutineDispatcher = Dispatchers.IO): WipeReport =
            withContext(io) { wipeFile(dbPath, force) }

        /** Version of the Rust core. */
        @JvmStatic
        val version: String get() = sdkVersion()

        /** Largest amount of one transfer, in minor units of its currency. */
        @JvmStatic
        val maxAmountMinor: Long get() = io.sendonce.maxAmountMinor()
    }

    private val closed = AtomicBoolean(false)
    private val lock = Any()
    private var loaded = false // guarded by lock
    private val early = ArrayList<Transfer>() // changes delivered before the first read; guarded by lock
    private var list = emptyList<Transfer>() // guarded by lock
    private val snapshot = MutableStateFlow(Shown(emptyList<Transfer>(), closed = false))
    private val profileLock = Any()
    private val profile = MutableStateFlow(Shown(core.networkProfile(), closed = false)) // written under profileLock
    private val callbacks = CopyOnWriteArrayList<(Transfer) -> Unit>()
    private val composers: MutableSet<Composer> = Collections.synchronizedSet(Collections.newSetFromMap(WeakHashMap()))
    private var listenerId: ULong = 0u
    private var holders = 1 // claims of a shared instance not yet released by close(); guarded by instances

    /** Another [shared] call: the same configuration gets this instance (one more claim), another is refused. */
    private fun claim(wanted: SharedSettings): SendOnce {
        val differ = openedWith?.differences(wanted).orEmpty()
        if (differ.isNotEmpty()) {
            throw SendOnceException.InvalidConfig(
                "the shared instance on this file was opened with another ${differ.joinToString()}; configure it " +
                    "once, at application start, and pass the same configuration and objects everywhere",
            )
        }
        holders += 1
        return this
    }

    /** One holder of a shared instance lets go: true when it was the last (then it closes). */
    private fun releaseShared(key: String): Boolean = synchronized(instances) {
        if (closed.get() || --holders > 0) return false
        if (instances[key] === this) instances.remove(key)
        true
    }

    /**
     * Every transfer, newest first: the current list at once, then after every change. Built from the
     * changed transfer each listener call delivers (never a re-read of the table). Completes on [close].
     */
    override val transfers: Flow<List<Transfer>> = snapshot.untilClosed()

    /** The latest list [transfers] emitted (no I/O, never throws). */
    override val currentTransfers: List<Transfer> get() = snapshot.value.value

    /** Registers with Rust first, then reads, so no change falls between the read and the listener. */
    private fun start() {
        listenerId = core.addListener(Relay(WeakReference(this)))
        val first = core.transfers()
        synchronized(lock) {
            list = first
            loaded = true
            // A change delivered while the read ran may be older than what the read saw: keep the newer.
            for (t in early) {
                val seen = list.firstOrNull { it.localId == t.localId }
                if (seen == null || !t.updatedAt.isBefore(seen.updatedAt)) list = merged(list, t)
            }
            early.clear()
            snapshot.value = Shown(list, closed = false)
        }
    }

    /** The user confirmed: mints the key, commits the transfer durably and returns it; sending starts at once. */
    @Throws(SendOnceException::class)
    override suspend fun sendTransfer(request: TransferRequest): Transfer = live { core.sendTransferBlocking(request) }

    /** One transfer by local id. */
    @Throws(SendOnceException::class)
    override suspend fun transfer(localId: String): Transfer = live { core.transfer(localId) }

    /**
     * The user confirmed an operation of the app's own API (build it with [operation]): the key is minted
     * and method, path, headers and exact body are committed before the first byte; every attempt sends them.
     */
    @Throws(SendOnceException::class)
    override suspend fun sendOperation(operation: OperationRequest): Transfer = live { core.sendOperationBlocking(operation) }

    /** The customer completed the step the server asked for (RequiresAction): sent again, same key and bytes. */
    @Throws(SendOnceException::class)
    override suspend fun actionCompleted(localId: String): Transfer = live { core.actionCompleted(localId) }

    /**
     * One page of the history, newest first: up to [limit] (at most 500) transfers after the one with local
     * id [after] (the last of the previous page; `null` for the first). Pages never repeat or skip a
     * transfer while new ones are added; [SendOnceException.NotFound] if [after] was pruned meanwhile.
     */
    @Throws(SendOnceException::class)
    override suspend fun transfers(after: String?, limit: Int): List<Transfer> {
        require(limit >= 0) { "limit must not be negative" }
        return live { core.transfersPage(after, limit.toUInt()) }
    }

    /** Transfers not yet final, newest first. */
    @Throws(SendOnceException::class)
    override suspend fun unfinishedTransfers(): List<Transfer> = live { core.unfinishedTransfers() }

    /** One transfer as a flow of its states (distinct, from the moment of collection); completes on [close]. */
    override fun transferUpdates(localId: String): Flow<Transfer?> =
        transfers.map { list -> list.firstOrNull { it.localId == localId } }.distinctUntilChanged()

    /** Suspends until the transfer is settled (final, or handed to the user as NeedsAttention). */
    @Throws(SendOnceException::class)
    override suspend fun awaitOutcome(localId: String): Transfer = live { core.waitForOutcome(localId) }

    /** Resolves a NeedsAttention transfer now through the status look-up by key (never a new key). */
    @Throws(SendOnceException::class)
    override suspend fun resolve(localId: String): Transfer = live { core.resolve(localId) }

    /**
     * Calls [listener] with the changed transfer at every change of any transfer, on an SDK thread. An
     * exception thrown by it is caught and ignored. Close the returned handle to unregister.
     */
    fun addListener(listener: (Transfer) -> Unit): AutoCloseable {
        callbacks.add(listener)
        return AutoCloseable { callbacks.remove(listener) }
    }

    /** The host app's connectivity signal; `true` wakes every waiting retry at once. */
    @Throws(SendOnceException::class)
    override suspend fun setNetworkAvailable(available: Boolean): Unit = live { core.setNetworkAvailable(available) }

    /** Replaces the bearer token (null to forget it); transfers waiting for credentials resume. */
    @Throws(SendOnceException::class)
    override suspend fun setAccessToken(token: String?): Unit = live { core.setAccessToken(token) }

    /** Train mode: switches the network simulator at run time; [seed] makes the faults reproducible. */
    @Throws(SendOnceException::class)
    override suspend fun setNetworkProfile(profile: NetworkProfile, seed: Long) {
        profile.checkSpans()
        live {
            // Set and read back under one lock: concurrent calls leave the mirror on the core's last value.
            synchronized(profileLock) {
                core.setNetworkProfile(profile, seed.toULong())
                if (!closed.get()) this.profile.value = Shown(core.networkProfile(), closed = false)
            }
        }
    }

    /**
     * The network profile in force, read from the Rust core (on [io]). A screen reads [currentNetworkProfile]
     * or collects [networkProfiles] instead: no I/O and no call into Rust.
     */
    @Throws(SendOnceException::class)
    suspend fun networkProfile(): NetworkProfile = live { core.networkProfile() }

    /**
     * The network profile in force: the current one at once, then every change. Only [setNetworkProfile]
     * changes it, so the value crosses the FFI once per change, never per read. Completes on [close].
     */
    override val networkProfiles: Flow<NetworkProfile> = profile.untilClosed()

    /** The profile [networkProfiles] shows now (memory: no I/O, no call into Rust, never throws). */
    override val currentNetworkProfile: NetworkProfile get() = profile.value.value

    /** What the network simulator did so far. */
    @Throws(SendOnceException::class)
    suspend fun networkStats(): NetsimStats = live { core.networkStats() }

    /**
     * Sends and resolves everything due within [deadline], then says what is left: what a WorkManager
     * `CoroutineWorker.doWork()` turns into `Result.success()` / `retry()`. Returns by the deadline even with
     * a request out; nothing is lost, it goes on with the same key.
     */
    @Throws(SendOnceException::class)
    suspend fun drain(deadline: java.time.Duration): DrainSummary {
        checkSpan("deadline", deadline)
        return live { core.drain(deadline).also { reload() } }
    }

    /** [drain] with a Kotlin duration. */
    @Throws(SendOnceException::class)
    override suspend fun drain(deadline: kotlin.time.Duration): DrainSummary =
        drain(java.time.Duration.ofMillis(deadline.inWholeMilliseconds))

    /** The app's lifecycle: in the background, network wake-ups are spread (see the README). A flag, no I/O. */
    @Throws(SendOnceException::class)
    override fun setInForeground(foreground: Boolean) {
        if (closed.get()) throw SendOnceException.Closed()
        core.setInForeground(foreground)
    }

    /** The account the store is bound to, if any. */
    @Throws(SendOnceException::class)
    override suspend fun accountId(): String? = live { core.accountId() }

    /**
     * Signs [accountId] in with [token]. Another account than the bound one throws
     * [SendOnceException.AccountMismatch] while it has unfinished transfers; with none, its history is wiped
     * first (the report says what).
     */
    @Throws(SendOnceException::class)
    override suspend fun signIn(accountId: String, token: String?): WipeReport? =
        live { core.signIn(accountId, token).also { reload() } }

    /**
     * Forgets the token and deletes every transfer and the account binding. Throws
     * [SendOnceException.UnfinishedTransfers] while any is unfinished, unless [force]; the report lists what
     * was discarded.
     */
    @Throws(SendOnceException::class)
    override suspend fun signOut(force: Boolean): WipeReport = live { core.signOut(force).also { reload() } }

    /**
     * Calls [listener] with every [SdkEvent] (attempts, answers, retries, outcomes, wipes), on an SDK thread;
     * close the handle to unregister. Events carry local ids only, never a recipient, note or token.
     */
    fun addEventListener(listener: (SdkEvent) -> Unit): AutoCloseable {
        if (closed.get()) throw SendOnceException.Closed()
        val id = core.addEventListener(object : EventListener {
            override fun onEvent(event: SdkEvent) {
                try {
                    listener(event)
                } catch (e: Throwable) {
                    if (e is VirtualMachineError) throw e
                }
            }
        })
        return AutoCloseable { if (!closed.get()) core.removeListener(id) }
    }

    /** A composer for one confirm screen; closed with the SDK at the latest. */
    @Throws(SendOnceException::class)
    override suspend fun composer(): Composer = live { track(Composer(core.composer(), io)) }

    /**
     * The composer of a transfer confirmed earlier, e.g. by a screen the system killed: keep its local id in
     * `SavedStateHandle` and re-attach here. The SDK decides what it shows (Send stays off unless the
     * transfer is final) and it reaches the receipt like the original screen would.
     */
    @Throws(SendOnceException::class)
    override suspend fun composer(localId: String): Composer = live { track(Composer(core.composerFor(localId), io)) }

    /**
     * The composer for a confirm screen the system may have killed: pass the local id the screen saved in
     * `SavedStateHandle` (null if none). The SDK decides: that transfer, finished or not (so a receipt
     * survives process death); else the newest unfinished transfer; else a fresh composer.
     */
    @Throws(SendOnceException::class)
    override suspend fun restoreComposer(savedLocalId: String?): Composer =
        live { track(Composer(core.restoreComposer(savedLocalId), io)) }

    /**
     * Stops sending and releases the file; every flow (of this SDK and of its composers) completes. Nothing is
     * lost: a request cut off here is sent again, with the same key, on the next [open]. Safe to call twice.
     * On an instance from [shared] it releases this caller's claim only (see [shared]).
     * No store transaction runs here: the SDK aborts its tasks and drops the file lock.
     */
    override fun close() {
        if (sharedKey != null && !releaseShared(sharedKey)) return
        if (!closed.compareAndSet(false, true)) return
        callbacks.clear()
        val open = synchronized(composers) { composers.toList() }
        open.forEach { it.close() }
        try {
            core.removeListener(listenerId)
            core.shutdown()
        } finally {
            core.close() // frees the native handle
            synchronized(lock) { snapshot.value = Shown(list, closed = true) }
            synchronized(profileLock) { profile.value = profile.value.copy(closed = true) }
        }
    }

    /** Re-reads the list after a call that may delete rows (a wipe), which no change delivers. */
    private fun reload() {
        val fresh = core.transfers()
        synchronized(lock) {
            if (closed.get()) return
            list = fresh
            snapshot.value = Shown(list, closed = false)
        }
    }

    private fun track(composer: Composer): Composer = composer.also { composers.add(it) }

    private fun onChanged(transfer: Transfer) {
        synchronized(lock) {
            if (closed.get()) return
            if (!loaded) {
                early.add(transfer)
                return
            }
        }
        // Listeners first: once a flow shows a change, every listener has been told of it.
        for (callback in callbacks) {
            try {
                callback(transfer)
            } catch (e: Throwable) {
                if (e is VirtualMachineError) throw e
                // A listener's failure is its own; the SDK carries on.
            }
        }
        synchronized(lock) {
            if (closed.get()) return
            list = merged(list, transfer)
            snapshot.value = Shown(list, closed = false)
        }
    }

    /** Runs [block] on [io]; maps a call that lost the race with [close] to [SendOnceException.Closed]. */
    private suspend fun <T> live(block: suspend () -> T): T {
        if (closed.get()) throw SendOnceException.Closed()
        return withContext(io) {
            try {
                block()
            } catch (e: IllegalStateException) {
                // uniffi's "object has already been destroyed": close() won a race with this call.
                if (closed.get()) throw SendOnceException.Closed()
                throw e
            }
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

/** [list] with [t] in place of its older state, or inserted where the newest-first order puts it. */
internal fun merged(list: List<Transfer>, t: Transfer): List<Transfer> {
    val at = list.indexOfFirst { it.localId == t.localId }
    if (at >= 0) return list.toMutableList().also { it[at] = t }
    val newestFirst = compareByDescending<Transfer> { it.createdAt }.thenByDescending { it.localId }
    val insertAt = list.indexOfFirst { newestFirst.compare(t, it) < 0 }.let { if (it < 0) list.size else it }
    return list.toMutableList().also { it.add(insertAt, t) }
}
