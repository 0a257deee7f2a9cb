package io.sendonce.bench

import io.sendonce.NetworkProfile
import io.sendonce.SendOnceConfig
import io.sendonce.SendOnceCore
import io.sendonce.TransferRequest
import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.Test
import java.io.File
import java.nio.file.Files

/**
 * Figure 2 of scripts/bench: µs per call of two cheap SDK queries through the uniffi bindings
 * (JNA). Writes per-round figures as JSON; asserts nothing about time.
 */
class FfiBenchTest {
    private fun rounds(iterations: Int, rounds: Int, call: () -> Unit): List<Double> {
        repeat(iterations) { call() } // warm-up: JIT, JNA's method lookups
        return (0 until rounds).map {
            val start = System.nanoTime()
            repeat(iterations / rounds) { call() }
            (System.nanoTime() - start) / 1e3 / (iterations / rounds)
        }
    }

    @Test
    fun cheapQueries() {
        val iterations = System.getProperty("sendonce.bench.iterations", "200000").toInt()
        val out = File(System.getProperty("sendonce.bench.out", "ffi-kotlin.json"))
        val dir = Files.createTempDirectory("sendonce-ffi-bench").toFile()
        val core = SendOnceCore.open(SendOnceConfig(baseUrl = "http://127.0.0.1:9", dbPath = File(dir, "sdk.db").path))
        try {
            core.setNetworkAvailable(false) // keep the sender idle
            val t = runBlocking {
                core.sendTransfer(TransferRequest(toUserId = "usr_bench", amountMinor = 100L, currency = "BDT", note = null))
            }
            var sink = 0L
            val profile = rounds(iterations, 10) { if (core.networkProfile() == NetworkProfile.Off) sink++ }
            val transfer = rounds(iterations / 10, 10) { sink += core.transfer(t.localId).amountMinor }
            fun arr(v: List<Double>) = v.joinToString(",", "[", "]") { "%.4f".format(it) }
            out.parentFile?.mkdirs()
            out.writeText(
                "{\"language\":\"kotlin\",\"runtime\":\"${System.getProperty("java.vm.name")} ${System.getProperty("java.version")}\"," +
                    "\"network_profile_us\":${arr(profile)},\"transfer_us\":${arr(transfer)},\"sink\":$sink}\n",
            )
        } finally {
            core.shutdown()
            core.close()
            dir.deleteRecursively()
        }
    }
}
