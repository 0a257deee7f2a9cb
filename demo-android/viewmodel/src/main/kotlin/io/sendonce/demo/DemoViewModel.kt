package io.sendonce.demo

import io.sendonce.Composer
import io.sendonce.ComposerState
import io.sendonce.SendOnce
import io.sendonce.SendOnceClient
import io.sendonce.SendOnceException
import io.sendonce.Transfer
import io.sendonce.TransferRequest
import io.sendonce.currentTransfer
import io.sendonce.isFinal
import io.sendonce.isSettled
import io.sendonce.sendEnabled
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.CoroutineStart
import kotlinx.coroutines.ExperimentalCoroutinesApi
import kotlinx.coroutines.delay
import kotlinx.coroutines.flow.Flow
import kotlinx.coroutines.flow.MutableStateFlow
import kotlinx.coroutines.flow.SharingStarted
import kotlinx.coroutines.flow.StateFlow
import kotlinx.coroutines.flow.combine
import kotlinx.coroutines.flow.distinctUntilChanged
import kotlinx.coroutines.flow.flatMapLatest
import kotlinx.coroutines.flow.flow
import kotlinx.coroutines.flow.flowOf
import kotlinx.coroutines.flow.map
import kotlinx.coroutines.flow.stateIn
import kotlinx.coroutines.flow.update
import kotlinx.coroutines.launch
import kotlinx.coroutines.sync.Mutex
import kotlinx.coroutines.sync.withLock
import kotlinx.coroutines.withContext
import java.io.File
import java.io.IOException
import java.net.URI
import java.util.concurrent.atomic.AtomicBoolean
import kotlin.random.Random

/**
 * The whole demo screen: wallet balance, recipient and amount form, confirm step, progress, receipt,
 * recent transfers, Train mode and the server URL setting. Plain Kotlin (coroutines + StateFlow, no
 * Android classes): the Compose shell renders [state] and calls the `on…` functions, nothing else.
 *
 * Every transfer decision (key, state, retry, whether Send is enabled) is the SDK's; this class only turns
 * SDK state into text and forwards taps. [filesDir] holds the demo account, [databaseDir] the SDK's database
 * (Android: `noBackupFilesDir`, so a restored backup never brings back a stale copy of the transfers);
 * [scope] is the owner's (Android: `viewModelScope`); [memory] is what survives process death (Android:
 * `SavedStateHandle`). Call [close] when the screen goes away: the SDK is the process's shared instance
 * ([SendOnce.shared]) and keeps sending in the background, where a WorkManager worker
 * ([DemoBackground.drain]) finishes what is left.
 */
@OptIn(ExperimentalCoroutinesApi::class)
class DemoViewModel(
    private val filesDir: File,
    private val scope: CoroutineScope,
    private val options: DemoOptions = DemoOptions(),
    private val memory: ScreenMemory = InMemoryScreenMemory(),
    private val databaseDir: File = filesDir,
    /** Told of the shared SDK each time a session opens it: the shell attaches background sending there. */
    private val onSdkOpened: (SendOnceClient) -> Unit = {},
) : AutoCloseable {
    private class Session(val account: DemoAccount, val sdk: SendOnce, val composer: Composer, val openedAtWallMs: Long) {
        /** The screen goes away; the shared SDK goes on in the background (or is closed, with [sdkToo]). */
        fun close(sdkToo: Boolean) {
            composer.close()
            if (sdkToo) {
                sdk.close()
            } else {
                runCatching { sdk.setInForeground(false) }
            }
        }
    }

    /** What the user typed and chose; everything else on screen comes from the SDK. */
    private data class Model(
        val loading: Boolean = true,
        val setupError: String? = null,
        val serverUrl: String,
        val serverUrlField: String,
        val settingsError: String? = null,
        val step: Screen = Screen.FORM,
        val recipient: String = "",
        val amount: String = "",
        val showValidation: Boolean = false,
        val pending: TransferRequest? = null,
        val errorText: String? = null,
        val notice: String? = null,
        val wallet: Wallet? = null,
        val balanceError: String? = null,
        val trainMode: TrainMode = TrainMode.OFF,
        val networkAvailable: Boolean = true,
    )

    private data class ComposerView(val state: ComposerState, val sendEnabled: Boolean)

    private val store by lazy { AccountStore(File(filesDir, ACCOUNT_FILE)) }
    private val walletClient = WalletClient()
    private val lifecycle = Mutex()
    private val taps = Mutex()
    private val closed = AtomicBoolean(false)
    private val model = MutableStateFlow(Model(serverUrl = options.defaultServerUrl, serverUrlField = options.defaultServerUrl))
    private val session = MutableStateFlow<Session?>(null)

    private val composerView: Flow<ComposerView> = session.flatMapLatest { s ->
        if (s == null) {
            flowOf(ComposerView(ComposerState.Editing, false))
        } else {
            // `sendEnabled` read off the same state value (Rust's `composerStateSendEnabled`, which is what the
            // composer's own `sendEnabled` flow carries): combining the two flows could pair a new state with
            // the previous flag for one frame.
            s.composer.state.map { ComposerView(it, it.sendEnabled) }
        }
    }
    private val transfers: Flow<List<Transfer>> = session.flatMapLatest { it?.sdk?.transfers ?: flowOf(emptyList()) }

    /** Ticks once a second while the screen shows a countdown, so "next try in Xs" counts down. */
    private val ticks: Flow<Long> = composerView.map { it.state is ComposerState.Waiting }.distinctUntilChanged()
        .flatMapLatest { waiting ->
            if (waiting) {
                flow {
                    while (true) {
                        emit(options.nowMs())
                        delay(options.tickMs)
                    }
                }
            } else {
                flowOf(options.nowMs())
            }
        }

    /** The screen. */
    val state: StateFlow<DemoUiState> = combine(model, session, composerView, transfers, ticks) { m, s, c, list, _ ->
        render(m, s, c, list)
    }.stateIn(scope, SharingStarted.Eagerly, DemoUiState(serverUrl = options.defaultServerUrl, serverUrlField = options.defaultServerUrl))

    init {
        // The balance follows every transfer that ends (and the first list after opening).
        scope.launch {
            transfers.map { list -> list.count { it.state.isFinal } }.distinctUntilChanged().collect { refreshBalance() }
        }
        scope.launch {
            val saved = withContext(options.io) { store.serverUrl }
            if (saved != null) model.update { it.copy(serverUrl = saved, serverUrlField = saved) }
            connect()
        }
    }

    // --- taps and platform events ---------------------------------------------------------------

    fun onRecipientChanged(text: String) = inOrder { model.update { it.copy(recipient = text, errorText = null) } }

    fun onAmountChanged(text: String) = inOrder { model.update { it.copy(amount = text, errorText = null) } }

    /** Review: checks the form and shows the confirm step. */
    fun onReviewTapped() = inOrder {
        model.update { m ->
            val invalid = Texts.validation(m.recipient, m.amount, currency(m))
            val amount = Texts.parseAmount(m.amount, currency(m))
            if (invalid != null || amount !is Texts.AmountInput.Valid) {
                m.copy(showValidation = true)
            } else {
                val request = TransferRequest(toUserId = m.recipient.trim(), amountMinor = amount.minor, currency = currency(m), note = null)
                m.copy(step = Screen.CONFIRM, pending = request, errorText = null, notice = null)
            }
        }
    }

    /**
     * Send. Every tap goes to the composer, which returns the same transfer for every tap of one intent: ten
     * quick taps are one transfer with one key. The button's enabled state is the composer's `sendEnabled`.
     */
    fun onSendTapped() = inOrder {
        val s = session.value ?: return@inOrder
        val request = model.value.pending ?: return@inOrder
        model.update { it.copy(errorText = null, notice = null) }
        scope.launch {
            try {
                // Kept for process death: the restored screen re-attaches to this transfer, receipt included.
                memory.transferId = s.composer.confirm(request).localId
            } catch (e: SendOnceException) {
                if (!closed.get()) model.update { it.copy(errorText = Texts.errorText(e, request.currency)) }
            }
        }
    }

    /** Back from the confirm step (or from a rejection) to the form, keeping what was typed. */
    fun onEditTapped() = inOrder {
        startNewIntent()
        model.update { it.copy(step = Screen.FORM, pending = null, errorText = null, notice = null) }
    }

    /** "Send another" after the receipt (or after handing a transfer over as Needs attention). */
    fun onSendAnotherTapped() = inOrder {
        if (startNewIntent()) {
            model.update { it.copy(step = Screen.FORM, pending = null, amount = "", showValidation = false, errorText = null, notice = null) }
        }
    }

    /** Needs attention: asks the server about the transfer's key now (never sends it with a new key). */
    fun onCheckAgainTapped() {
        val s = session.value ?: return
        val t = s.composer.currentState.currentTransfer ?: return
        model.update { it.copy(errorText = null) }
        scope.launch {
            try {
                s.sdk.resolve(t.localId)
            } catch (e: SendOnceException) {
                if (!closed.get()) model.update { it.copy(errorText = Texts.errorText(e, t.currency)) }
            }
        }
    }

    /** Train mode: switches the SDK's network simulator at once (transfers in flight included). */
    fun onTrainModeSelected(mode: TrainMode) {
        model.update { it.copy(trainMode = mode) }
        val s = session.value ?: return
        scope.launch {
            try {
                s.sdk.setNetworkProfile(mode.profile, options.trainSeed ?: Random.nextLong())
            } catch (e: SendOnceException) {
                model.update { it.copy(errorText = Texts.errorText(e, currency(it))) }
            }
        }
    }

    /** The platform's connectivity callback (Android `NetworkCallback`, iOS `NWPathMonitor`). */
    fun onNetworkChanged(available: Boolean) {
        model.update { it.copy(networkAvailable = available) }
        val s = session.value
        scope.launch {
            try {
                s?.sdk?.setNetworkAvailable(available)
            } catch (_: SendOnceException) {
                // Closed meanwhile; the next session reads networkAvailable when it opens.
            }
            if (available) refreshBalance()
        }
    }

    fun onRefreshBalanceTapped() {
        scope.launch { refreshBalance() }
    }

    fun onServerUrlChanged(text: String) = model.update { it.copy(serverUrlField = text, settingsError = null) }

    /**
     * Saves the server URL and reconnects. Each server has its own demo account and SDK database, so a
     * transfer still waiting for one server resumes when the app points at that server again.
     */
    fun onServerUrlSaved() {
        val url = model.value.serverUrlField.trim().trimEnd('/')
        val uri = runCatching { URI(url) }.getOrNull()
        if (uri == null || uri.scheme !in setOf("http", "https") || uri.host.isNullOrEmpty()) {
            model.update { it.copy(settingsError = Texts.text("demo.settings.url", DemoOptions.DEFAULT_SERVER_URL)) }
            return
        }
        model.update {
            it.copy(
                serverUrl = url, serverUrlField = url, settingsError = null, step = Screen.FORM, pending = null,
                recipient = "", amount = "", showValidation = false, errorText = null, notice = null,
            )
        }
        scope.launch {
            withContext(options.io) { store.serverUrl = url }
            connect()
        }
    }

    /** Retry after a failed start (server unreachable on first start). */
    fun onRetryTapped() {
        scope.launch { connect() }
    }

    /**
     * The screen goes away (Android: `onCleared`). The shared SDK stays open and sends in the background;
     * what it cannot finish a worker drains later. Unfinished transfers are on disk either way.
     */
    override fun close() {
        if (!closed.compareAndSet(false, true)) return
        closeSession(sdkToo = false)
    }

    /** Closes the SDK as well, as the process ending does (tests; a sign-out). */
    fun shutdown() {
        closed.set(true)
        closeSession(sdkToo = true)
    }

    // --- inside ---------------------------------------------------------------------------------

    /**
     * Runs a tap's handler after every earlier tap's, in tap order: a handler that waits for the SDK (a new
     * intent reads the store) must not be overtaken by the typing that follows it. With nothing pending it
     * runs at once, so a text field's state never lags behind the keyboard.
     */
    private fun inOrder(block: suspend () -> Unit) {
        scope.launch(start = CoroutineStart.UNDISPATCHED) { taps.withLock { block() } }
    }

    private fun currency(m: Model) = m.wallet?.currency?.takeIf { it.isNotEmpty() } ?: options.currency

    /** Returns false when the current transfer is still on its way (the composer refuses a new intent). */
    private suspend fun startNewIntent(): Boolean {
        val s = session.value ?: return true
        // Forgotten before the composer moves on: its new state shows the form at once, and a process
        // death from then on must restore the form, not the old receipt.
        val saved = memory.transferId
        memory.transferId = null
        return try {
            s.composer.newIntent()
            true
        } catch (e: SendOnceException) {
            memory.transferId = saved
            model.update { it.copy(errorText = Texts.errorText(e, currency(it))) }
            false
        }
    }

    @Synchronized
    private fun closeSession(sdkToo: Boolean = true) {
        val s = session.value ?: return
        session.value = null
        s.close(sdkToo)
    }

    private suspend fun connect() = lifecycle.withLock {
        if (closed.get()) return@withLock
        closeSession()
        val url = model.value.serverUrl
        model.update { it.copy(loading = true, setupError = null, wallet = null, balanceError = null) }
        val opened = try {
            withContext(options.io) { openSession(url) }
        } catch (e: Exception) {
            model.update { it.copy(loading = false, setupError = setupText(url, e)) }
            return@withLock
        }
        session.value = opened
        if (closed.get()) {
            closeSession()
            return@withLock
        }
        val resumed = opened.composer.currentState !is ComposerState.Editing
        model.update {
            it.copy(
                loading = false,
                recipient = it.recipient.ifEmpty { opened.account.recipientId },
                notice = if (resumed) resumedNotice else null,
            )
        }
        refreshBalance()
    }

    private suspend fun openSession(url: String): Session {
        val account = store.account(url)
            ?: walletClient.signUp(url, options.startingBalanceMinor, options.currency).also(store::save)
        val openedAt = options.nowMs()
        val sdk = SendOnce.shared(DemoBackground.config(databaseDir, account, options))
        onSdkOpened(sdk)
        try {
            val m = model.value
            // The shared instance may have run in the background since the last screen: set it as this one wants.
            sdk.setInForeground(true)
            sdk.setNetworkProfile(m.trainMode.profile, options.trainSeed ?: Random.nextLong())
            sdk.setNetworkAvailable(m.networkAvailable)
            // After a kill: the SDK re-attaches the screen to the transfer it showed (a receipt included),
            // else to the newest unfinished one.
            val composer = sdk.restoreComposer(memory.transferId)
            memory.transferId = composer.currentState.currentTransfer?.localId
            return Session(account, sdk, composer, openedAt)
        } catch (e: Throwable) {
            sdk.close()
            throw e
        }
    }

    private suspend fun refreshBalance() {
        val s = session.value ?: return
        try {
            val wallet = withContext(options.io) { walletClient.wallet(s.account.serverUrl, s.account.token) }
            if (session.value === s) model.update { it.copy(wallet = wallet, balanceError = null) }
        } catch (e: IOException) {
            if (session.value === s) model.update { it.copy(balanceError = Texts.text("demo.balance.unreachable")) }
        }
    }

    private fun setupText(url: String, e: Exception): String = when {
        e is HttpStatusException && e.status == 404 -> Texts.text("demo.setup.no_test_api", url)
        e is HttpStatusException -> Texts.text("demo.setup.status", url, e.status.toString())
        e is IOException -> Texts.text("demo.setup.unreachable", url)
        e is SendOnceException -> Texts.errorText(e, options.currency)
        else -> Texts.text("demo.setup.other", e.message ?: e.javaClass.simpleName)
    }

    /** Pure: the screen from the model, the composer and the SDK's list. */
    private fun render(m: Model, s: Session?, c: ComposerView, list: List<Transfer>): DemoUiState {
        val cs = c.state
        val screen = when (cs) {
            is ComposerState.Editing -> m.step
            is ComposerState.Submitting, is ComposerState.Waiting -> Screen.PROGRESS
            is ComposerState.Done -> Screen.RECEIPT
            is ComposerState.Rejected -> Screen.REJECTED
            // server-mock never asks for an action; were it to, the user has something to do.
            is ComposerState.NeedsAttention, is ComposerState.RequiresAction -> Screen.NEEDS_ATTENTION
        }
        val validation = Texts.validation(m.recipient, m.amount, currency(m))
        val showValidation = m.showValidation || m.amount.isNotEmpty()
        val current = cs.currentTransfer
        val derivedError = when (cs) {
            is ComposerState.Rejected -> Texts.rejectionText(cs.reason, cs.transfer)
            is ComposerState.NeedsAttention, is ComposerState.RequiresAction -> Texts.needsAttention
            else -> null
        }
        return DemoUiState(
            loading = m.loading,
            setupError = m.setupError,
            balanceText = when {
                m.wallet != null -> Texts.text("demo.balance", Texts.money(m.wallet.balanceMinor, m.wallet.currency))
                m.balanceError != null -> Texts.text("demo.balance.unavailable", m.balanceError)
                else -> Texts.text("demo.balance.loading")
            },
            balanceMinor = m.wallet?.balanceMinor,
            accountText = s?.let { Texts.text("demo.account", it.account.userId) } ?: "",
            accountUserId = s?.account?.userId,
            screen = screen,
            recipient = m.recipient,
            amount = m.amount,
            validationText = if (showValidation) validation else null,
            reviewEnabled = validation == null && s != null,
            confirmText = m.pending?.let { Texts.text("demo.confirm", Texts.money(it.amountMinor, it.currency), it.toUserId) }
                ?.takeIf { screen == Screen.CONFIRM || screen == Screen.REJECTED },
            transferTitle = current?.let(Texts::title),
            sendEnabled = s != null && c.sendEnabled,
            sendHint = when {
                s == null || c.sendEnabled -> null
                cs is ComposerState.Submitting || cs is ComposerState.Waiting -> Texts.text("demo.send_off.in_flight")
                cs is ComposerState.Done -> Texts.text("demo.send_off.done")
                else -> null
            },
            showSpinner = cs is ComposerState.Submitting || cs is ComposerState.Waiting,
            statusLine = when (cs) {
                is ComposerState.Submitting -> Texts.text("demo.sending")
                is ComposerState.Waiting -> Texts.waitingLine(cs.transfer, cs.needsAuth, sdkNow(s), options.clockSpeed)
                else -> null
            },
            receipt = (cs as? ComposerState.Done)?.receipt?.let { r ->
                Receipt(
                    title = Texts.text("demo.receipt.title", Texts.title(r)),
                    serverTransferId = r.serverTransferId ?: "",
                    idempotencyKey = r.idempotencyKey,
                    attempts = r.attempts.toInt(),
                    replayNote = if (r.replayed) Texts.text("demo.note.replayed") else null,
                )
            },
            errorText = m.errorText ?: derivedError,
            notice = m.notice,
            transfers = list.take(options.recentLimit).map {
                TransferRow(
                    it.localId, Texts.title(it), Texts.stateLabel(it), it.serverTransferId, it.idempotencyKey, it.state.isSettled,
                    Texts.announcement(it),
                )
            },
            trainMode = m.trainMode,
            networkAvailable = m.networkAvailable,
            serverUrl = m.serverUrl,
            serverUrlField = m.serverUrlField,
            settingsError = m.settingsError,
        )
    }

    /** Now on the SDK's clock (which runs [DemoOptions.clockSpeed] times faster than the wall clock). */
    private fun sdkNow(s: Session?): Long {
        val now = options.nowMs()
        if (s == null || options.clockSpeed == 1.0) return now
        return s.openedAtWallMs + ((now - s.openedAtWallMs) * options.clockSpeed).toLong()
    }

    companion object {
        /** The notice after re-attaching to a transfer confirmed before the process died. */
        val resumedNotice: String get() = Texts.text("demo.notice.resumed")

        /** The receipt's note when the server replayed its stored answer. */
        val replayedNote: String get() = Texts.text("demo.note.replayed")

        /** Where the demo keeps its signed-up account (read by [DemoBackground] too). */
        const val ACCOUNT_FILE = "demo-account.properties"
    }
}
