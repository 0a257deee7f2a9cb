package io.sendonce.demo

import io.sendonce.Json
import io.sendonce.LedgerEntry
import io.sendonce.RetryPolicy
import io.sendonce.ServerTest
import io.sendonce.core.TransferState
import io.sendonce.User
import io.sendonce.defaultRetryPolicy
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.SupervisorJob
import kotlinx.coroutines.cancel
import kotlinx.coroutines.delay
import kotlinx.coroutines.flow.first
import kotlinx.coroutines.launch
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import kotlinx.coroutines.withTimeoutOrNull
import org.junit.jupiter.api.AfterEach
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertNotNull
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Assertions.fail
import org.junit.jupiter.api.Test
import java.io.File
import java.nio.file.Files
import java.time.Duration
import java.util.Locale
import java.util.concurrent.CopyOnWriteArrayList
import kotlin.time.Duration.Companion.seconds

/**
 * The demo's view model against the real Rust library (through the Kotlin bindings) and the real
 * server-mock on loopback: what the screen shows after taps, train mode, a kill-and-reopen, and errors.
 */
class DemoViewModelTest : ServerTest() {
    private val cleanups = CopyOnWriteArrayList<() -> Unit>()

    @AfterEach
    fun cleanUp() {
        cleanups.reversed().forEach { runCatching(it) }
        cleanups.clear()
    }

    private val fastRetry = defaultRetryPolicy().copy(base = Duration.ofMillis(20), cap = Duration.ofMillis(300), budgetBurst = 1000u, budgetPerSecond = 1000.0)

    private fun options(
        serverUrl: String = server.baseUrl,
        retry: RetryPolicy? = fastRetry,
        clockSpeed: Double = 1.0,
        balance: Long = 1_000_000,
    ) = DemoOptions(
        defaultServerUrl = serverUrl,
        retry = retry,
        requestTimeout = Duration.ofSeconds(5),
        clockSpeed = clockSpeed,
        trainSeed = 7,
        tickMs = 100,
        startingBalanceMinor = balance,
    )

    private fun tempDir(): File = Files.createTempDirectory("sendonce-demo-").toFile().also { dir ->
        cleanups.add { dir.deleteRecursively() }
    }

    /** A view model as the app makes it: its own scope (Android: viewModelScope), closed after the test. */
    private fun viewModel(dir: File = tempDir(), options: DemoOptions = options(), memory: ScreenMemory = InMemoryScreenMemory()): DemoViewModel {
        Texts.locale = Locale.US
        val scope = CoroutineScope(SupervisorJob() + Dispatchers.Default)
        val vm = DemoViewModel(dir, scope, options, memory, databaseDir = File(dir, "no-backup"))
        cleanups.add { vm.shutdown(); scope.cancel() }
        return vm
    }

    private fun test(block: suspend CoroutineScope.() -> Unit) = runBlocking { withTimeout(120_000) { block() } }

    private suspend fun DemoViewModel.await(what: String, timeoutMs: Long = 30_000, p: (DemoUiState) -> Boolean): DemoUiState =
        withTimeoutOrNull(timeoutMs) { state.first(p) } ?: fail("timed out waiting for $what; last state: ${state.value}")

    /** Waits until the app is ready, types the form and goes to the confirm step. */
    private suspend fun DemoViewModel.review(amount: String, recipient: String? = null): DemoUiState {
        val ready = await("ready") { !it.loading && it.setupError == null && it.balanceMinor != null }
        onRecipientChanged(recipient ?: ready.recipient)
        onAmountChanged(amount)
        onReviewTapped()
        return await("confirm step") { it.screen == Screen.CONFIRM }
    }

    private fun debitsOf(userId: String) = server.ledger().filter { it.kind == "debit" && it.userId == userId }

    @Test
    fun `ten quick taps on Send make one transfer and one debit`() = test {
        val vm = viewModel()
        val confirm = vm.review("12.50")
        assertEquals("Send 12.50 BDT to ${confirm.recipient}?", confirm.confirmText)
        assertTrue(confirm.sendEnabled, "Send is enabled on the confirm step")
        val me = confirm.accountUserId!!

        // Record every screen from the first tap on: Send must stay disabled until the receipt.
        val seen = CopyOnWriteArrayList<DemoUiState>()
        val recorder = launch(Dispatchers.Default) { vm.state.collect { seen.add(it) } }
        repeat(10) { vm.onSendTapped() }
        val done = vm.await("receipt") {
            it.screen == Screen.RECEIPT && it.balanceMinor == 1_000_000L - 1250 && it.transfers.singleOrNull()?.stateLabel == "Sent"
        }
        recorder.cancel()

        val receipt = done.receipt!!
        assertEquals("Sent 12.50 BDT to ${confirm.recipient}", receipt.title)
        assertFalse(done.sendEnabled, "after the receipt Send stays off until Send another")
        assertFalse(done.showSpinner)
        assertNull(done.errorText)
        assertEquals("Balance: 9,987.50 BDT", done.balanceText)
        assertTrue(seen.filter { it.screen == Screen.PROGRESS }.none { it.sendEnabled }, "Send enabled while sending")

        // Late taps on the receipt change nothing either.
        repeat(5) { vm.onSendTapped() }
        delay(300)
        assertEquals(1, vm.state.value.transfers.size, "one transfer in the list: ${vm.state.value.transfers}")
        assertEquals("Sent", vm.state.value.transfers.single().stateLabel)
        val debits = debitsOf(me)
        assertEquals(1, debits.size, "one debit in the ledger: $debits")
        assertEquals(receipt.serverTransferId, debits.single().transferId)
        assertEquals(receipt.idempotencyKey, debits.single().idempotencyKey)

        // Send another: a new intent, a new key.
        vm.onSendAnotherTapped()
        val form = vm.await("form again") { it.screen == Screen.FORM }
        assertEquals("", form.amount)
        vm.review("1")
        vm.onSendTapped()
        vm.onSendTapped()
        val second = vm.await("second receipt") { it.screen == Screen.RECEIPT && it.transfers.count { t -> t.settled } == 2 }
        assertTrue(second.receipt!!.idempotencyKey != receipt.idempotencyKey)
        assertEquals(2, debitsOf(me).size)
    }

    @Test
    fun `ten quick taps behind a replaying load balancer still debit once`() = test {
        val vm = viewModel()
        vm.onTrainModeSelected(TrainMode.LB_REPLAY)
        val confirm = vm.review("3")
        repeat(10) { vm.onSendTapped() }
        val done = vm.await("receipt") { it.screen == Screen.RECEIPT }
        assertEquals(TrainMode.LB_REPLAY, done.trainMode)
        assertEquals(1, done.transfers.size)
        assertEquals(1, debitsOf(confirm.accountUserId!!).size)
    }

    @Test
    fun `train mode settles every transfer once`() = test {
        // The real Train profile (tunnels, lost answers, seconds of latency, replays) with the SDK's default
        // schedule, on a clock running 50x so its minutes of tunnels pass in seconds.
        val vm = viewModel(options = options(retry = null, clockSpeed = 50.0))
        vm.onTrainModeSelected(TrainMode.TRAIN)
        val me = vm.review("5").accountUserId!!
        val keys = mutableListOf<String>()
        for (i in 1..3) {
            if (i > 1) {
                vm.onSendAnotherTapped()
                vm.review("$i")
            }
            repeat(3) { vm.onSendTapped() }
            val done = vm.await("receipt $i", timeoutMs = 60_000) { it.screen == Screen.RECEIPT && it.transfers.size == i }
            keys.add(done.receipt!!.idempotencyKey)
            val debits = server.debits(done.receipt.idempotencyKey)
            assertEquals(1, debits.size, "one debit for transfer $i")
            assertEquals(done.receipt.serverTransferId, debits.single().transferId)
        }
        assertEquals(3, keys.toSet().size)
        assertEquals(3, debitsOf(me).size)
        val last = vm.await("balance") { it.balanceMinor == 1_000_000L - 500 - 200 - 300 && it.transfers.all { t -> t.settled } }
        assertTrue(last.transfers.all { it.stateLabel == "Sent" }, "${last.transfers}")
        assertEquals(TrainMode.TRAIN, last.trainMode)
    }

    @Test
    fun `offline shows the waiting line and the network coming back settles it`() = test {
        val vm = viewModel(options = options(retry = fastRetry.copy(base = Duration.ofSeconds(1), cap = Duration.ofSeconds(4))))
        vm.onTrainModeSelected(TrainMode.OFFLINE)
        val me = vm.review("7").accountUserId!!
        vm.onSendTapped()
        val waiting = vm.await("waiting line") { it.statusLine?.contains("next try in") == true }
        val match = Regex("""Waiting for network — attempt (\d+), next try in (\d+)s""").matchEntire(waiting.statusLine!!)
        assertNotNull(match, waiting.statusLine)
        assertTrue(match!!.groupValues[1].toInt() >= 1)
        assertTrue(match.groupValues[2].toInt() in 0..4, waiting.statusLine)
        assertTrue(waiting.showSpinner)
        assertFalse(waiting.sendEnabled)
        assertEquals(Screen.PROGRESS, waiting.screen)
        assertEquals("7.00 BDT to ${waiting.recipient}", waiting.transferTitle)
        vm.await("list label") { it.transfers.singleOrNull()?.stateLabel?.startsWith("Waiting for network (attempt") == true }
        assertTrue(debitsOf(me).isEmpty())

        vm.onTrainModeSelected(TrainMode.OFF)
        vm.onNetworkChanged(true)
        val done = vm.await("receipt") { it.screen == Screen.RECEIPT }
        assertEquals(1, server.debits(done.receipt!!.idempotencyKey).size)
    }

    @Test
    fun `closing while a transfer waits offline and reopening resumes it with the same key`() = test {
        val dir = tempDir()
        val first = viewModel(dir)
        first.onTrainModeSelected(TrainMode.OFFLINE)
        val me = first.review("42").accountUserId!!
        first.onSendTapped()
        val waiting = first.await("waiting") { it.statusLine?.startsWith("Waiting for network — attempt") == true }
        val key = waiting.transfers.single().idempotencyKey
        first.shutdown() // the app is killed while the transfer waits
        delay(300)
        assertTrue(server.debits(key).isEmpty(), "nothing reached the server while offline")

        // The app starts again on the same files: same account, same database.
        val second = viewModel(dir)
        val resumed = second.await("resumed") { !it.loading && it.notice == DemoViewModel.resumedNotice }
        assertEquals(me, resumed.accountUserId)
        assertEquals(TrainMode.OFF, resumed.trainMode)
        val done = second.await("receipt") { it.screen == Screen.RECEIPT && it.transfers.singleOrNull()?.settled == true }
        assertEquals(key, done.receipt!!.idempotencyKey, "the same key, never a new one")
        assertEquals("42.00 BDT to ${waiting.recipient}", done.transferTitle)
        assertEquals(1, done.transfers.size)
        assertEquals(1, server.debits(key).size)
        assertEquals(1, debitsOf(me).size)
        second.await("balance") { it.balanceMinor == 1_000_000L - 4200 }
    }

    @Test
    fun `the screen goes away offline and a worker's drain on the shared instance settles it`() = test {
        val dir = tempDir()
        val vm = viewModel(dir)
        vm.onNetworkChanged(false)
        vm.review("17")
        vm.onSendTapped()
        val waiting = vm.await("waiting") { it.transfers.singleOrNull() != null }
        val key = waiting.transfers.single().idempotencyKey
        vm.close() // onCleared: the screen is gone, the process and its shared SDK stay
        assertTrue(server.debits(key).isEmpty())

        // WorkManager runs the worker with the network back: it drains the same instance.
        val summary = DemoBackground.drain(dir, server.baseUrl, 20.seconds, options(), databaseDir = File(dir, "no-backup"))!!
        assertEquals(listOf(key), summary.finished.map { it.idempotencyKey })
        assertEquals(TransferState.SUCCEEDED, summary.finished.single().state)
        assertTrue(summary.unfinished.isEmpty())
        assertEquals(1, server.debits(key).size)
        vm.shutdown()
    }

    /** Before: the comma was stripped, so "12,50" typed in German confirmed and debited 1,250.00 BDT. */
    @Test
    fun `a German user's 12,50 debits twelve and a half BDT, not 1250`() = test {
        val vm = viewModel()
        Texts.locale = Locale.GERMANY
        try {
            val confirm = vm.review("12,50")
            assertEquals("12,50 BDT an ${confirm.recipient} senden?", confirm.confirmText)
            assertEquals(null, confirm.sendHint, "Send is on: nothing to explain")
            vm.onSendTapped()
            val receipt = vm.await("receipt") { it.screen == Screen.RECEIPT }
            // Send is off on the receipt: a screen reader says why, in the user's language.
            assertEquals("Senden ist aus: diese Überweisung ist erledigt. Für eine neue: Weitere senden.", receipt.sendHint)
            assertEquals(listOf(1250L), debitsOf(confirm.accountUserId!!).map { it.amountMinor })
            // The list row carries what a screen reader announces, in the user's language.
            vm.await("announcement") { it.transfers.firstOrNull()?.announcement == "Gesendet: 12,50 BDT an ${confirm.recipient}" }
        } finally {
            Texts.locale = Locale.US
        }
    }

    @Test
    fun `form validation and a too large amount show their texts`() = test {
        val vm = viewModel()
        vm.await("ready") { !it.loading && it.balanceMinor != null }
        vm.onRecipientChanged("")
        vm.onReviewTapped()
        assertEquals("Enter the recipient's user id", vm.await("validation") { it.validationText != null }.validationText)
        vm.onRecipientChanged("usr_x")
        vm.onAmountChanged("12.345")
        val bad = vm.await("decimals") { it.validationText == "At most 2 decimal places for BDT" }
        assertFalse(bad.reviewEnabled)
        vm.onReviewTapped()
        assertEquals(Screen.FORM, vm.state.value.screen)

        // Format is fine, the SDK's limit is not: the typed InvalidAmount error, nothing persisted.
        val confirm = vm.review("10000000001", recipient = "usr_x")
        assertTrue(confirm.sendEnabled)
        vm.onSendTapped()
        val refused = vm.await("invalid amount") { it.errorText != null }
        assertEquals("Invalid amount: enter more than 0 and at most 10,000,000,000.00 BDT.", refused.errorText)
        assertEquals(Screen.CONFIRM, refused.screen)
        assertTrue(refused.sendEnabled, "a refused confirm leaves Send enabled")
        assertTrue(refused.transfers.isEmpty())
        vm.onEditTapped()
        val form = vm.await("form") { it.screen == Screen.FORM }
        assertNull(form.errorText)
        assertEquals("10000000001", form.amount)
    }

    @Test
    fun `unknown recipient is a 404 rejection with its text`() = test {
        val vm = viewModel()
        val me = vm.review("5", recipient = "usr_nobody").accountUserId!!
        vm.onSendTapped()
        val rejected = vm.await("rejected") { it.screen == Screen.REJECTED }
        assertEquals("Unknown recipient: no account has the id usr_nobody. Nothing was sent.", rejected.errorText)
        assertTrue(rejected.sendEnabled, "after a definitive no the user may send a corrected request")
        assertFalse(rejected.showSpinner)
        vm.await("list label") { it.transfers.singleOrNull()?.stateLabel == "Declined — unknown recipient" }
        assertTrue(debitsOf(me).isEmpty())
        vm.onEditTapped()
        val form = vm.await("form") { it.screen == Screen.FORM }
        assertEquals("usr_nobody", form.recipient)
        assertNull(form.errorText)
    }

    @Test
    fun `insufficient funds is a 402 rejection with its text`() = test {
        val vm = viewModel(options = options(balance = 1_000))
        val ready = vm.review("50")
        assertEquals("Balance: 10.00 BDT", ready.balanceText)
        vm.onSendTapped()
        val rejected = vm.await("rejected") { it.screen == Screen.REJECTED }
        assertEquals("Not enough money: your balance is lower than 50.00 BDT. Nothing was sent.", rejected.errorText)
        vm.await("list label") { it.transfers.singleOrNull()?.stateLabel == "Declined — not enough money" }
        assertTrue(debitsOf(ready.accountUserId!!).isEmpty())
        assertEquals("Balance: 10.00 BDT", vm.state.value.balanceText)
    }

    @Test
    fun `key reused is a failure with its text and is never retried`() = test {
        ScriptedServer(422, "idempotency_key_reused").use { scripted ->
            val vm = viewModel(options = options(serverUrl = scripted.baseUrl))
            vm.review("5", recipient = "usr_bob")
            vm.onSendTapped()
            val failed = vm.await("failed") { it.screen == Screen.REJECTED }
            assertEquals(
                "Refused: this transfer's key was already used for a different request (key reused). " +
                    "No money moved twice. This is a bug in the app — please report it.",
                failed.errorText,
            )
            vm.await("list label") { it.transfers.singleOrNull()?.stateLabel == "Failed — key reused" }
            delay(500)
            assertEquals(1, scripted.transferRequests.get(), "a 422 key reuse is never retried")
        }
    }

    @Test
    fun `giving up while offline needs attention and Check again resolves it by key`() = test {
        val retry = fastRetry.copy(cap = Duration.ofMillis(200), giveUpAfter = Duration.ofMillis(400))
        val vm = viewModel(options = options(retry = retry))
        vm.onTrainModeSelected(TrainMode.OFFLINE)
        vm.review("9")
        vm.onSendTapped()
        val stuck = vm.await("needs attention") { it.screen == Screen.NEEDS_ATTENTION }
        assertEquals(Texts.needsAttention, stuck.errorText)
        assertFalse(stuck.showSpinner)
        vm.await("list label") { it.transfers.singleOrNull()?.stateLabel == "Needs attention" }

        // Back online: the status look-up by key finds that the server never got it. No new key, no send.
        vm.onTrainModeSelected(TrainMode.OFF)
        vm.onCheckAgainTapped()
        val resolved = vm.await("resolved") { it.screen == Screen.REJECTED }
        assertEquals("The server never received this transfer. No money moved.", resolved.errorText)
        val row = vm.await("list label") { it.transfers.singleOrNull()?.stateLabel == "Failed — never reached the server" }
        assertTrue(server.debits(row.transfers.single().idempotencyKey).isEmpty())
    }

    @Test
    fun `an unreachable server and a bad URL show their texts, and a good URL connects`() = test {
        val vm = viewModel(options = options(serverUrl = "http://127.0.0.1:1"))
        val down = vm.await("setup error") { it.setupError != null }
        assertTrue(down.setupError!!.startsWith("Cannot reach the server at http://127.0.0.1:1."), down.setupError)
        assertFalse(down.reviewEnabled)

        vm.onServerUrlChanged("not a url")
        vm.onServerUrlSaved()
        assertEquals("Enter a URL like http://127.0.0.1:8080", vm.await("settings error") { it.settingsError != null }.settingsError)

        vm.onServerUrlChanged(server.baseUrl + "/")
        vm.onServerUrlSaved()
        val up = vm.await("connected") { !it.loading && it.setupError == null && it.balanceMinor != null }
        assertEquals(server.baseUrl, up.serverUrl)
        assertEquals("Balance: 10,000.00 BDT", up.balanceText)
        assertTrue(up.recipient.isNotEmpty(), "the demo recipient is filled in")
    }

    @Test
    fun `a finished receipt survives process death through the saved transfer id`() = test {
        val dir = tempDir()
        val memory = InMemoryScreenMemory() // SavedStateHandle: survives the process, nothing else does
        val first = viewModel(dir, memory = memory)
        first.review("6")
        first.onSendTapped()
        val receipt = first.await("receipt") { it.screen == Screen.RECEIPT }.receipt!!
        assertNotNull(memory.transferId, "the screen saved its transfer's local id")
        first.shutdown() // the system kills the process while the receipt is on screen

        // The process comes back with the saved state: the SDK re-attaches the screen to the same receipt.
        val second = viewModel(dir, memory = memory)
        val restored = second.await("restored receipt") { !it.loading && it.screen == Screen.RECEIPT }
        assertEquals(receipt.idempotencyKey, restored.receipt!!.idempotencyKey)
        assertEquals(receipt.serverTransferId, restored.receipt.serverTransferId)
        assertFalse(restored.sendEnabled, "a restored receipt does not enable Send")
        assertTrue(File(dir, "no-backup").listFiles()!!.any { it.name.endsWith(".db") }, "the database is in no-backup storage")

        // Without the saved id (a fresh start), the finished transfer is not brought back: the form shows.
        second.shutdown()
        val fresh = viewModel(dir)
        assertEquals(Screen.FORM, fresh.await("fresh start") { !it.loading }.screen)
        fresh.shutdown()

        // "Send another" clears the saved id, so the next restore shows the form.
        val third = viewModel(dir, memory = memory)
        third.await("restored again") { !it.loading && it.screen == Screen.RECEIPT }
        third.onSendAnotherTapped()
        third.await("form") { it.screen == Screen.FORM }
        assertNull(memory.transferId)
    }
}
