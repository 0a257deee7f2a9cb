package io.sendonce

import kotlinx.coroutines.flow.MutableStateFlow
import kotlinx.coroutines.flow.StateFlow
import kotlinx.coroutines.flow.asStateFlow
import java.lang.ref.WeakReference
import java.util.concurrent.atomic.AtomicBoolean

/**
 * One confirm screen's state machine (made by [SendOnce.composer]). However often Send is tapped, one
 * intent is one transfer with one key: a second [confirm] while the first is unfinished returns the same
 * transfer. [sendEnabled] is false from the first confirm until a definitive no (after Done it stays false
 * until [newIntent]).
 */
class Composer internal constructor(private val core: ComposerCore) : AutoCloseable {
    private val closed = AtomicBoolean(false)
    private val refreshLock = Any()
    private val _state = MutableStateFlow(core.state())
    private val _sendEnabled = MutableStateFlow(_state.value.sendEnabled)

    /** What the screen shows, updated at every change. */
    val state: StateFlow<ComposerState> = _state.asStateFlow()

    /** Whether the Send button is enabled (same as `state.value.sendEnabled`; never true next to a disabling state). */
    val sendEnabled: StateFlow<Boolean> = _sendEnabled.asStateFlow()

    init {
        core.setListener(Relay(WeakReference(this)))
        refresh()
    }

    /** The user tapped Send. Returns the transfer of this intent (the same one for every repeated tap). */
    @Throws(SendOnceException::class)
    suspend fun confirm(request: TransferRequest): Transfer {
        if (closed.get()) throw SendOnceException.Closed("the composer is closed")
        try {
            return core.confirm(request)
        } finally {
            refresh()
        }
    }

    /** Shorthand of [confirm] with the request's fields. */
    @Throws(SendOnceException::class)
    suspend fun confirm(toUserId: String, amountMinor: Long, currency: String, note: String? = null): Transfer =
        confirm(TransferRequest(toUserId = toUserId, amountMinor = amountMinor, currency = currency, note = note))

    /** The transfer this screen follows, if confirmed. */
    val transfer: Transfer? get() = core.transfer()

    /** Starts a new intent ("send another"); throws [SendOnceException.TransferUnfinished] while one runs. */
    @Throws(SendOnceException::class)
    fun newIntent() {
        core.newIntent()
        refresh()
    }

    /** Stops following the transfer (the transfer itself goes on). */
    override fun close() {
        if (!closed.compareAndSet(false, true)) return
        try {
            core.setListener(null)
        } finally {
            core.close()
        }
    }

    /** Reads the current state under one lock, so flows never step back to an older state. */
    private fun refresh() {
        if (closed.get()) return
        try {
            synchronized(refreshLock) {
                val s = core.state()
                // Order the two writes so that a collector combining both flows never sees Send enabled
                // next to a state that disables it: switch off before the new state, on after it.
                if (s.sendEnabled) {
                    _state.value = s
                    _sendEnabled.value = true
                } else {
                    _sendEnabled.value = false
                    _state.value = s
                }
            }
        } catch (_: SendOnceException) {
        } catch (_: IllegalStateException) {
        }
    }

    private class Relay(private val composer: WeakReference<Composer>) : ComposerListener {
        override fun onStateChanged(state: ComposerState) {
            try {
                composer.get()?.refresh()
            } catch (e: Throwable) {
                if (e is VirtualMachineError) throw e
            }
        }
    }
}
