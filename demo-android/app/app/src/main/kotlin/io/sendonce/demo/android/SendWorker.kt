package io.sendonce.demo.android

import android.content.Context
import androidx.work.BackoffPolicy
import androidx.work.Constraints
import androidx.work.CoroutineWorker
import androidx.work.ExistingWorkPolicy
import androidx.work.NetworkType
import androidx.work.OneTimeWorkRequestBuilder
import androidx.work.WorkManager
import androidx.work.WorkerParameters
import io.sendonce.SendOnceException
import io.sendonce.demo.DemoBackground
import io.sendonce.demo.DemoOptions
import java.util.concurrent.TimeUnit
import kotlin.time.Duration.Companion.minutes

/**
 * Sends what the screen left behind: drains the process's shared SDK (the same instance the screen used,
 * if the process is still alive) within WorkManager's time, then enqueues itself for the earliest next
 * attempt. Thin on purpose: every decision is the SDK's. (Not built here: no Android SDK on this machine.)
 */
class SendWorker(context: Context, params: WorkerParameters) : CoroutineWorker(context, params) {
    override suspend fun doWork(): Result {
        val summary = try {
            DemoBackground.drain(
                applicationContext.filesDir,
                DemoOptions.DEFAULT_SERVER_URL,
                deadline = 8.minutes,
                databaseDir = applicationContext.noBackupFilesDir,
            )
        } catch (e: SendOnceException.Busy) {
            return Result.retry() // another process holds the file: later
        } ?: return Result.success()
        // Chained after this run (REPLACE would cancel the run that is enqueuing it).
        summary.nextAttemptIn?.let { enqueue(applicationContext, it.toMillis(), ExistingWorkPolicy.APPEND_OR_REPLACE) }
        return Result.success()
    }

    companion object {
        private const val NAME = "sendonce-drain"

        /** One pending drain at a time, when there is a network, no sooner than [delayMs]. */
        fun enqueue(context: Context, delayMs: Long, policy: ExistingWorkPolicy = ExistingWorkPolicy.REPLACE) {
            val request = OneTimeWorkRequestBuilder<SendWorker>()
                .setConstraints(Constraints.Builder().setRequiredNetworkType(NetworkType.CONNECTED).build())
                .setInitialDelay(delayMs, TimeUnit.MILLISECONDS)
                .setBackoffCriteria(BackoffPolicy.EXPONENTIAL, 30, TimeUnit.SECONDS)
                .build()
            WorkManager.getInstance(context).enqueueUniqueWork(NAME, policy, request)
        }
    }
}
