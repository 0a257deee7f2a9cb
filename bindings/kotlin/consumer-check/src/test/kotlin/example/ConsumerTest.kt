package example

import io.sendonce.NetworkProfile
import io.sendonce.SendOnce
import io.sendonce.SendOnceClient
import io.sendonce.SendOnceConfig
import io.sendonce.testing.FakeSendOnce
import io.sendonce.core.TransferState
import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import java.nio.file.Files

/** What an app that added `io.sendonce:sendonce-kotlin:0.1.0` can do: the Rust core runs from the jar. */
class ConsumerTest {
    @Test
    fun `a transfer confirmed offline is committed by the native core and is there after a reopen`() = runBlocking {
        val db = Files.createTempDirectory("consumer").resolve("transfers.db").toString()
        val config = SendOnceConfig(baseUrl = "https://bank.example", dbPath = db, networkProfile = NetworkProfile.Offline)
        val sent = SendOnce.open(config).use { sdk ->
            sdk.sendTransfer(toUserId = "u_landlord", amountMinor = 50_000, currency = "BDT")
        }
        assertTrue(sent.idempotencyKey.length >= 32, "a key minted at confirm: ${sent.idempotencyKey}")
        SendOnce.open(config).use { sdk ->
            val again = sdk.transfer(sent.localId)
            assertEquals(sent.idempotencyKey, again.idempotencyKey)
            // Offline (train mode's tunnel): committed and waiting to be sent, never final.
            assertTrue(again.state in setOf(TransferState.PENDING, TransferState.SENDING, TransferState.RETRYING), "${again.state}")
        }
    }

    /** The app's own screen logic, typed against the SDK's interface. */
    private suspend fun payRent(sdk: SendOnceClient): String =
        sdk.awaitOutcome(sdk.sendTransfer(toUserId = "u_landlord", amountMinor = 50_000, currency = "BDT").localId).state.name

    @Test
    fun `the app logic runs on the fake from the testing artifact`() = runBlocking<Unit> {
        val fake = FakeSendOnce().apply { onSend = { succeed(it.localId) } }
        assertEquals(TransferState.SUCCEEDED.name, payRent(fake))
        assertEquals(1, fake.confirmed.size)
    }
}
