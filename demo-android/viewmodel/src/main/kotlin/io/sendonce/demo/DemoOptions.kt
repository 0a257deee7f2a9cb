package io.sendonce.demo

import io.sendonce.RetryPolicy
import kotlinx.coroutines.CoroutineDispatcher
import kotlinx.coroutines.Dispatchers
import java.time.Duration

/** How the demo is wired; the defaults are the app's, tests override a few. */
data class DemoOptions(
    /** server-mock on the development machine as the Android emulator sees it. */
    val defaultServerUrl: String = DEFAULT_SERVER_URL,
    val currency: String = "BDT",
    /** Opening balance of the demo user created on first start (10,000.00 BDT). */
    val startingBalanceMinor: Long = 1_000_000,
    /** Retry schedule; null for the SDK's defaults (0.5 s base, 60 s cap, 24 h give-up). */
    val retry: RetryPolicy? = null,
    val requestTimeout: Duration = Duration.ofSeconds(15),
    /** The SDK clock's speed (1 on a device; tests speed up train mode's minutes-long tunnels). */
    val clockSpeed: Double = 1.0,
    /** Seed of train mode's faults; null for a new one at every switch. */
    val trainSeed: Long? = null,
    /** How often the "next try in Xs" countdown is refreshed. */
    val tickMs: Long = 1_000,
    /** How many recent transfers the list shows. */
    val recentLimit: Int = 20,
    /** Where blocking work (opening the database, HTTP) runs. */
    val io: CoroutineDispatcher = Dispatchers.IO,
    /** Wall clock (ms since the epoch). */
    val nowMs: () -> Long = System::currentTimeMillis,
) {
    companion object {
        /**
         * The host's server-mock, forwarded into the emulator by `adb reverse tcp:8080 tcp:8080`: the SDK
         * speaks plain http only to loopback, and server-mock's test API answers only loopback host names.
         */
        const val DEFAULT_SERVER_URL = "http://127.0.0.1:8080"
    }
}
