package io.sendonce.demo.android

import android.app.Notification
import android.app.NotificationChannel
import android.app.NotificationManager
import android.content.Context
import android.content.pm.ServiceInfo
import android.os.Build
import androidx.work.Constraints
import androidx.work.CoroutineWorker
import androidx.work.ExistingWorkPolicy
import androidx.work.ForegroundInfo
import androidx.work.NetworkType
import androidx.work.OneTimeWorkRequestBuilder
import androidx.work.OutOfQuotaPolicy
import androidx.work.WorkManager
import androidx.work.WorkerParameters
import io.sendonce.BackgroundSending
import io.sendonce.DrainPolicy
import io.sendonce.DrainRequest
import io.sendonce.DrainScheduler
import io.sendonce.SendOnceException
import io.sendonce.WorkerOutcome
import io.sendonce.demo.DemoBackground
import io.sendonce.demo.DemoOptions
import java.util.concurrent.TimeUnit
import kotlin.time.Duration.Companion.minutes

/**
 * WorkManager carrying out the bindings' [BackgroundSending] decisions: the SDK's transfers are followed from
 * the moment a screen opens it ([background] `.attach`), so a transfer confirmed and then swiped away is
 * drained by an expedited unique work (KEEP) as soon as there is a network, and each run enqueues the next at
 * the earliest next attempt. Thin on purpose. (Not built here: no Android SDK on this machine.)
 */
class SendWorker(context: Context, params: WorkerParameters) : CoroutineWorker(context, params) {
    override suspend fun doWork(): Result {
        val sdk = try {
            DemoBackground.sharedSdk(
                applicationContext.filesDir, DemoOptions.DEFAULT_SERVER_URL, databaseDir = applicationContext.noBackupFilesDir,
            ) ?: return Result.success() // nobody signed up here: nothing to send
        } catch (e: SendOnceException.Busy) {
            return Result.retry() // another process holds the file: later
        }
        return when (background(applicationContext).runWorker(sdk, deadline = 8.minutes)) {
            WorkerOutcome.SUCCESS -> Result.success()
            WorkerOutcome.RETRY -> Result.retry()
        }
    }

    /** Expedited work runs as a foreground service on Android 11 and lower; Android 14 needs its type. */
    override suspend fun getForegroundInfo(): ForegroundInfo {
        applicationContext.getSystemService(NotificationManager::class.java)
            .createNotificationChannel(
                NotificationChannel(CHANNEL, applicationContext.getString(R.string.sending_in_background), NotificationManager.IMPORTANCE_LOW),
            )
        val notification = Notification.Builder(applicationContext, CHANNEL)
            .setSmallIcon(android.R.drawable.stat_sys_upload)
            .setContentTitle(applicationContext.getString(R.string.sending_in_background))
            .build()
        return if (Build.VERSION.SDK_INT >= Build.VERSION_CODES.Q) {
            ForegroundInfo(1, notification, ServiceInfo.FOREGROUND_SERVICE_TYPE_DATA_SYNC) // DrainRequest.FOREGROUND_SERVICE_TYPE
        } else {
            ForegroundInfo(1, notification)
        }
    }

    companion object {
        private const val CHANNEL = "sendonce"

        /** The app's one [BackgroundSending], over WorkManager. */
        fun background(context: Context) = BackgroundSending(WorkManagerScheduler(context.applicationContext))
    }
}

/** [DrainRequest] as WorkManager's unique work. */
class WorkManagerScheduler(private val context: Context) : DrainScheduler {
    override fun schedule(request: DrainRequest) {
        val work = OneTimeWorkRequestBuilder<SendWorker>()
            .apply { if (request.requiresNetwork) setConstraints(Constraints.Builder().setRequiredNetworkType(NetworkType.CONNECTED).build()) }
            .setInitialDelay(request.initialDelay.toMillis(), TimeUnit.MILLISECONDS)
            .apply { if (request.expedited) setExpedited(OutOfQuotaPolicy.RUN_AS_NON_EXPEDITED_WORK_REQUEST) }
            .build()
        val policy = when (request.policy) {
            DrainPolicy.KEEP -> ExistingWorkPolicy.KEEP
            DrainPolicy.APPEND_OR_REPLACE -> ExistingWorkPolicy.APPEND_OR_REPLACE
        }
        WorkManager.getInstance(context).enqueueUniqueWork(request.uniqueName, policy, work)
    }
}
