package io.sendonce.bench

import io.sendonce.IntegrityCheckingUniffiLib
import io.sendonce.NetworkProfile
import io.sendonce.RustBuffer
import io.sendonce.SendOnceConfig
import io.sendonce.SendOnceCore
import io.sendonce.TransferRequest
import io.sendonce.UniffiLib
import io.sendonce.UniffiRustCallStatus
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
            // The floor under every generated call, measured the same way: a JNA direct-mapped call with
            // no structure (uniffi's contract version), and one with the call-status structure every
            // generated call allocates (clone + free of the object handle: two such calls, halved).
            val direct = rounds(iterations, 10) { sink += IntegrityCheckingUniffiLib.ffi_sendonce_ffi_uniffi_contract_version() }
            val withStatus = rounds(iterations, 10) {
                val handle = core.uniffiCloneHandle()
                UniffiLib.uniffi_sendonce_ffi_fn_free_sendoncecore(handle, UniffiRustCallStatus())
            }.map { it / 2 }
            // What the generated code allocates per call: a call status (with its nested buffer) per JNA
            // call, and a by-value buffer for a returned record or enum.
            val statusAlloc = rounds(iterations, 10) { sink += UniffiRustCallStatus().code }
            val bufferAlloc = rounds(iterations, 10) { sink += RustBuffer.ByValue().len }
            fun arr(v: List<Double>) = v.joinToString(",", "[", "]") { "%.4f".format(it) }
            out.parentFile?.mkdirs()
            out.writeText(
                "{\"language\":\"kotlin\",\"runtime\":\"${System.getProperty("java.vm.name")} ${System.getProperty("java.version")}\"," +
                    "\"network_profile_us\":${arr(profile)},\"transfer_us\":${arr(transfer)}," +
                    "\"jna_direct_call_us\":${arr(direct)},\"jna_status_call_us\":${arr(withStatus)}," +
                    "\"status_alloc_us\":${arr(statusAlloc)},\"buffer_alloc_us\":${arr(bufferAlloc)},\"sink\":$sink}\n",
            )
        } finally {
            core.shutdown()
            core.close()
            dir.deleteRecursively()
        }
    }
}
