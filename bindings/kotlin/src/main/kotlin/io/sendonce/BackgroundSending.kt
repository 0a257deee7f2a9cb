// When an Android app must ask WorkManager to send, decided once here and tested on the JVM; the app's
// WorkManager adapter (a DrainScheduler and a CoroutineWorker, bindings/README.md) only carries it out.
package io.sendonce

import io.sendonce.core.*
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.Job
import kotlinx.coroutines.flow.collect
import kotlinx.coroutines.launch
import java.time.Duration

/** How a drain request meets one already enqueued under the same unique name (WorkManager's policies). */
enum class DrainPolicy {
    /** Keep the pending one: at confirm and at start, a second request never delays or cancels the first. */
    KEEP,

    /** Run after the current one (the worker enqueuing its own next run: REPLACE would cancel itself). */
    APPEND_OR_REPLACE,
}

/**
 * One unique background drain to enqueue: WorkManager's `enqueueUniqueWork(uniqueName, policy, request)`
 * with a network constraint when [requiresNetwork], [initialDelay], and `setExpedited` when [expedited]
 * (a transfer the user just confirmed; on Android 11 and lower expedited work runs as a foreground service,
 * whose type on Android 14 must be declared: [FOREGROUND_SERVICE_TYPE]).
 */
data class DrainRequest(
    val uniqueName: String,
    val policy: DrainPolicy,
    val initialDelay: Duration,
    val expedited: Boolean,
    val requiresNetwork: Boolean = true,
) {
    companion object {
        /** The foreground-service type of an expedited drain (`android:foregroundServiceType`, Android 14+). */
        const val FOREGROUND_SERVICE_TYPE = "dataSync"
    }
}

/** The app's WorkManager, as [BackgroundSending] uses it: enqueue one unique drain. */
fun interface DrainScheduler {
    /** Enqueues [request] (never throws for a request WorkManager already holds: that is what KEEP is for). */
    fun schedule(request: DrainRequest)
}

/** What the worker returns: `Result.success()`, or `Result.retry()` when the file was busy. */
enum class WorkerOutcome { SUCCESS, RETRY }

/**
 * Background sending for Android, the decisions only: a transfer confirmed and then swiped away (or confirmed
 * offline) is sent by WorkManager when the OS gives time and a network, not at the next launch.
 *
 * - [attach] follows the SDK's transfers from app start: when there is anything unfinished at start, and at
 *   every transfer newly confirmed, it enqueues one unique drain with KEEP (expedited for a new confirm);
 * - [runWorker] is the worker's `doWork`: drains within the deadline and enqueues its own next run for the
 *   earliest next attempt (APPEND_OR_REPLACE), so nothing waits for the app to be opened again.
 *
 * Tested on the JVM against the real core (`BackgroundTest`); the WorkManager adapter is the recipe in
 * bindings/README.md (not built here: no Android SDK on this machine).
 */
class BackgroundSending(
    private val scheduler: DrainScheduler,
    /** WorkManager's unique work name: one pending drain per app. */
    val uniqueName: String = "sendonce-drain",
) {
    /**
     * Follows [sdk]'s transfers in [scope] (the application's scope, from `Application.onCreate`): enqueues a
     * drain at start when anything is unfinished, and an expedited one at each newly confirmed transfer.
     * Cancel the returned job to stop (closing the SDK ends it too).
     */
    fun attach(sdk: SendOnceClient, scope: CoroutineScope): Job = scope.launch {
        val seen = HashSet<String>()
        var first = true
        sdk.transfers.collect { list ->
            val fresh = list.filter { it.state.waitsForSending && seen.add(it.localId) }
            list.forEach { seen.add(it.localId) }
            when {
                first && list.any { it.state.waitsForSending } -> schedule(Duration.ZERO, expedited = false)
                !first && fresh.isNotEmpty() -> schedule(Duration.ZERO, expedited = true)
            }
            first = false
        }
    }

    /**
     * The worker's `doWork()`: drains [sdk] for up to [deadline] (keep it under WorkManager's 10 minutes), then
     * enqueues the next run at the earliest next attempt. [SendOnceException.Busy] (another process holds the
     * file) is RETRY; every other outcome is SUCCESS — what is unfinished is on disk, with its key.
     */
    suspend fun runWorker(sdk: SendOnceClient, deadline: kotlin.time.Duration): WorkerOutcome {
        val summary = try {
            sdk.drain(deadline)
        } catch (e: SendOnceException.Busy) {
            return WorkerOutcome.RETRY
        }
        // AuthRequired waits for a token, not for a worker: only what the sender will try again counts.
        if (summary.unfinished.any { it.state.waitsForSending }) {
            val delay = summary.nextAttemptIn ?: Duration.ZERO
            scheduler.schedule(DrainRequest(uniqueName, DrainPolicy.APPEND_OR_REPLACE, delay, expedited = false))
        }
        return WorkerOutcome.SUCCESS
    }

    private fun schedule(delay: Duration, expedited: Boolean) =
        scheduler.schedule(DrainRequest(uniqueName, DrainPolicy.KEEP, delay, expedited))
}

/** A state in which the SDK will send again by itself: what a background drain is for. */
private val TransferState.waitsForSending: Boolean
    get() = this == TransferState.PENDING || this == TransferState.SENDING || this == TransferState.RETRYING
