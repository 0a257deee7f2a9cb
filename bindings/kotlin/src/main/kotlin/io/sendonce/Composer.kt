package io.sendonce

import kotlinx.coroutines.CoroutineDispatcher
import kotlinx.coroutines.flow.Flow
import kotlinx.coroutines.flow.MutableStateFlow
import kotlinx.coroutines.withContext
import java.lang.ref.WeakReference
import java.util.concurrent.atomic.AtomicBoolean

/**
 * One confirm screen's state machine (made by [SendOnce.composer]). However often Send is tapped, one
 * intent is one transfer with one key: a second [confirm] while the first is unfinished returns the same
 * transfer. [sendEnabled] is false from the first confirm until a definitive no (after Done it stays false
 * until [newIntent]). Every call that touches the disk is `suspend` and runs on the SDK's I/O dispatcher.
 */
class Composer internal constructor(
    private val core: ComposerCore,
    private val io: CoroutineDispatcher,
) : ComposerClient {
    private val closed = AtomicBoolean(false)
    private val refreshLock = Any()
    private val shown = MutableStateFlow(Shown(core.state(), closed = false))
    private val enabled = MutableStateFlow(Shown(shown.value.value.sendEnabled, closed = false))

    /** What the screen shows: the current state at once, then every change. Completes on [close]. */
    override val state: Flow<ComposerState> = shown.untilClosed()

    /** Whether the Send button is enabled; never true next to a disabling [state]. Completes on [close]. */
    override val sendEnabled: Flow<Boolean> = enabled.untilClosed()

    /** The state [state] shows now (no I/O, never throws). */
    override val currentState: ComposerState get() = shown.value.value

    /** Whether Send is enabled now (no I/O, never throws). */
    override val isSendEnabled: Boolean get() = enabled.value.value

    init {
        core.setListener(Relay(WeakReference(this)))
        refresh()
    }

    /** The user tapped Send. Returns the transfer of this intent (the same one for every repeated tap). */
    @Throws(SendOnceException::class)
    override suspend fun confirm(request: TransferRequest): Transfer = live {
        try {
            core.confirm(request)
        } finally {
            refresh()
        }
    }

    /**
     * The user tapped Send on an operation of the app's own API (build it with [operation]): one key per
     * intent; a repeated tap — also while the operation waits in RequiresAction — returns the same one.
     */
    @Throws(SendOnceException::class)
    override suspend fun confirm(operation: OperationRequest): Transfer = live {
        try {
            core.confirmOperation(operation)
        } finally {
            refresh()
        }
    }

    /** The transfer this screen follows, if confirmed (read from the store). */
    @Throws(SendOnceException::class)
    override suspend fun transfer(): Transfer? = live { core.transfer() }

    /** Starts a new intent ("send another"); throws [SendOnceException.TransferUnfinished] while one runs. */
    @Throws(SendOnceException::class)
    override suspend fun newIntent(): Unit = live {
        core.newIntent()
        refresh()
    }

    /** Stops following the transfer (the transfer itself goes on); the flows complete. */
    override fun close() {
        if (!closed.compareAndSet(false, true)) return
        try {
            core.setListener(null)
        } catch (_: SendOnceException) {
        } catch (_: IllegalStateException) {
        } finally {
            core.close()
            synchronized(refreshLock) {
                enabled.value = enabled.value.copy(closed = true)
                shown.value = shown.value.copy(closed = true)
            }
        }
    }

    private suspend fun <T> live(block: suspend () -> T): T {
        if (closed.get()) throw SendOnceException.Closed()
        return withContext(io) { block() }
    }

    /** Reads the current state (memory, no I/O) under one lock, so flows never step back to an older state. */
    private fun refresh() {
        if (closed.get()) return
        try {
            synchronized(refreshLock) {
                if (closed.get()) return
                val s = core.state()
                // Order the two writes so that a collector combining both flows never sees Send enabled
                // next to a state that disables it: switch off before the new state, on after it.
                if (s.sendEnabled) {
                    shown.value = Shown(s, closed = false)
                    enabled.value = Shown(true, closed = false)
                } else {
                    enabled.value = Shown(false, closed = false)
                    shown.value = Shown(s, closed = false)
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
