package io.sendonce.demo

import io.sendonce.AccessToken
import io.sendonce.DrainSummary
import io.sendonce.SendOnce
import io.sendonce.SendOnceConfig
import java.io.File
import kotlin.time.Duration

/**
 * Background sending for the demo: the same shared SDK the screen uses, drained by a WorkManager worker
 * (`app/.../SendWorker.kt`) while no screen is open. Plain Kotlin, so it is tested on the JVM.
 */
object DemoBackground {
    /** The SDK config of [account]: one database file per demo user, in [databaseDir]. */
    fun config(databaseDir: File, account: DemoAccount, options: DemoOptions = DemoOptions()) = SendOnceConfig(
        baseUrl = account.serverUrl,
        dbPath = File(databaseDir.apply { mkdirs() }, "sendonce-${account.userId.replace(Regex("[^A-Za-z0-9_-]"), "_")}.db").path,
        accessToken = AccessToken(account.token),
        retry = options.retry,
        requestTimeout = options.requestTimeout,
        clockSpeed = options.clockSpeed,
        accountId = account.userId,
    )

    /**
     * The process's shared SDK of the account signed up here (the one the screen uses, if it is open); `null`
     * when nobody ever signed up (nothing to send). [filesDir] holds the account, [databaseDir] the database
     * (as for [DemoViewModel]). Throws `SendOnceException.Busy` when another process holds the file.
     */
    suspend fun sharedSdk(
        filesDir: File,
        serverUrl: String,
        options: DemoOptions = DemoOptions(),
        databaseDir: File = filesDir,
    ): SendOnce? {
        val account = AccountStore(File(filesDir, DemoViewModel.ACCOUNT_FILE)).account(serverUrl) ?: return null
        return SendOnce.shared(config(databaseDir, account, options))
    }

    /** Sends what is due within [deadline] on the shared instance ([sharedSdk]); `null` when nobody signed up. */
    suspend fun drain(
        filesDir: File,
        serverUrl: String,
        deadline: Duration,
        options: DemoOptions = DemoOptions(),
        databaseDir: File = filesDir,
    ): DrainSummary? = sharedSdk(filesDir, serverUrl, options, databaseDir)?.drain(deadline)
}
