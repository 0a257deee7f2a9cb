package io.sendonce.demo

import io.sendonce.core.Rejection
import io.sendonce.core.RejectionReason
import io.sendonce.SendOnce
import io.sendonce.SendOnceException
import io.sendonce.Transfer
import io.sendonce.core.TransferState
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.Assertions.assertTrue
import java.io.File
import java.time.Instant
import java.util.Locale
import java.util.ResourceBundle

/** The pure text functions, without a server. */
class TextsTest {
    init {
        Texts.locale = Locale.US
    }

    private fun transfer(
        state: TransferState,
        attempts: UInt = 1u,
        nextAt: Long? = null,
        rejection: Rejection? = null,
    ) = Transfer(
        localId = "l1", idempotencyKey = "k1", toUserId = "usr_bob", amountMinor = 1250, currency = "BDT", note = null,
        state = state, attempts = attempts, createdAt = Instant.EPOCH, updatedAt = Instant.EPOCH, lastAttemptAt = null,
        nextAttemptAt = nextAt?.let(Instant::ofEpochMilli), lastError = null, serverTransferId = null, rejection = rejection, replayed = false,
        operationType = "transfer", requiredAction = null,
    )

    @Test
    fun `money is formatted with grouping and two decimals`() {
        assertEquals("12.50 BDT", Texts.money(1250, "BDT"))
        assertEquals("10,000.00 BDT", Texts.money(1_000_000, "BDT"))
        assertEquals("0.05 BDT", Texts.money(5, "BDT"))
    }

    @Test
    fun `money follows the locale and the currency's own decimals`() {
        try {
            Texts.locale = Locale.GERMANY
            assertEquals("10.000,00 BDT", Texts.money(1_000_000, "BDT"))
            Texts.locale = Locale.US
            assertEquals("1,250 JPY", Texts.money(1250, "JPY"), "yen have no minor unit")
            assertEquals("1.250 KWD", Texts.money(1250, "KWD"), "dinars have three decimals")
        } finally {
            Texts.locale = Locale.US
        }
    }

    @Test
    fun `amount field parsing and validation texts`() {
        assertEquals(Texts.AmountInput.Valid(1250), Texts.parseAmount("12.5", "BDT"))
        assertEquals(Texts.AmountInput.Valid(100_000), Texts.parseAmount(" 1,000 ", "BDT"))
        assertEquals(Texts.AmountInput.Valid(50), Texts.parseAmount(".5", "BDT"))
        assertEquals(Texts.AmountInput.Invalid("Enter an amount"), Texts.parseAmount("", "BDT"))
        assertEquals(Texts.AmountInput.Invalid("Enter an amount like 12.50"), Texts.parseAmount("12a", "BDT"))
        assertEquals(Texts.AmountInput.Invalid("Enter an amount like 12.50"), Texts.parseAmount("-3", "BDT"))
        assertEquals(Texts.AmountInput.Invalid("Enter an amount like 12.50"), Texts.parseAmount(".", "BDT"))
        assertEquals(Texts.AmountInput.Invalid("At most 2 decimal places for BDT"), Texts.parseAmount("1.234", "BDT"))
        assertEquals(Texts.AmountInput.Invalid("The amount must be more than 0"), Texts.parseAmount("0.00", "BDT"))
        assertEquals("Enter the recipient's user id", Texts.validation(" ", "12", "BDT"))
        assertEquals("A user id has no spaces", Texts.validation("usr a", "12", "BDT"))
        assertNull(Texts.validation("usr_bob", "12", "BDT"))
    }

    /**
     * The field by the user's locale and the currency's minor unit (ISO 4217: JPY 0, BDT 2, KWD 3). Before,
     * commas were stripped and two decimals assumed: "12,50" typed in German became 1,250.00 (100x).
     */
    @Test
    fun `amounts are read by the locale and the currency's own minor unit`() {
        val de = Locale.GERMANY
        val en = Locale.US
        val ja = Locale.JAPAN
        fun minor(m: Long) = AmountReading.Minor(m)
        val cases = listOf(
            // German: "," is the decimal point, "." groups thousands.
            Triple(de, "BDT", "12,50") to minor(1250),
            Triple(de, "BDT", "12.50") to AmountReading.Malformed,
            Triple(de, "BDT", "1.250") to minor(125_000),
            Triple(de, "BDT", "1.250,5") to minor(125_050),
            Triple(de, "BDT", "0,005") to AmountReading.TooManyDecimals(2),
            Triple(de, "JPY", "1.000") to minor(1000),
            Triple(de, "JPY", "12,5") to AmountReading.TooManyDecimals(0),
            Triple(de, "KWD", "12,5") to minor(12_500),
            Triple(de, "KWD", "1,250") to minor(1250),
            Triple(de, "KWD", "1.000,000") to minor(1_000_000),
            Triple(de, "KWD", "1.000") to AmountReading.Ambiguous(1_000_000, 1000),
            // English: "." is the decimal point, "," groups thousands.
            Triple(en, "BDT", "12.50") to minor(1250),
            Triple(en, "BDT", "12,50") to AmountReading.Malformed,
            Triple(en, "BDT", "1,250") to minor(125_000),
            Triple(en, "BDT", "12.505") to AmountReading.TooManyDecimals(2),
            Triple(en, "BDT", "1,25,000") to AmountReading.Malformed,
            Triple(en, "JPY", "1,000") to minor(1000),
            Triple(en, "JPY", "1.000") to AmountReading.TooManyDecimals(0),
            Triple(en, "KWD", "1.250") to minor(1250),
            Triple(en, "KWD", "1,000") to AmountReading.Ambiguous(1_000_000, 1000),
            Triple(en, "KWD", "1,000.5") to minor(1_000_500),
            Triple(en, "KWD", "1000") to minor(1_000_000),
            // Japanese: as English; full-width digits are refused rather than guessed.
            Triple(ja, "JPY", "1,250") to minor(1250),
            Triple(ja, "JPY", "1250") to minor(1250),
            Triple(ja, "JPY", "12.5") to AmountReading.TooManyDecimals(0),
            Triple(ja, "JPY", "\uFF11\uFF12") to AmountReading.Malformed,
            Triple(ja, "BDT", "12.50") to minor(1250),
            Triple(ja, "BDT", "12,50") to AmountReading.Malformed,
            Triple(ja, "KWD", "1.5") to minor(1500),
            Triple(ja, "KWD", "1,000") to AmountReading.Ambiguous(1_000_000, 1000),
            // Separators anywhere else, signs, a second decimal point, 16 integer digits.
            Triple(en, "BDT", "1,2,3") to AmountReading.Malformed,
            Triple(en, "BDT", "1.2.3") to AmountReading.Malformed,
            Triple(de, "BDT", "+5") to AmountReading.Malformed,
            Triple(en, "BDT", "1234567890123456") to AmountReading.Malformed,
            Triple(en, "JPY", "0") to AmountReading.Zero,
            // French groups with a narrow no-break space; a typed space is accepted in its place.
            Triple(Locale.FRANCE, "BDT", "1 250,50") to minor(125_050),
        )
        val wrong = cases.mapNotNull { (input, want) ->
            val got = AmountReader.read(input.third, input.first, input.second)
            if (got == want) null else "${input.first} ${input.second} \"${input.third}\": got $got, want $want"
        }
        assertEquals(emptyList<String>(), wrong)
    }

    @Test
    fun `every amount refusal has its own text in the locale`() {
        try {
            Texts.locale = Locale.GERMANY
            assertEquals(Texts.AmountInput.Valid(1250), Texts.parseAmount("12,50", "BDT"))
            assertEquals(Texts.AmountInput.Invalid("Geben Sie einen Betrag wie 12,50 ein"), Texts.parseAmount("12.50", "BDT"))
            assertEquals(Texts.AmountInput.Invalid("JPY-Beträge haben keine Nachkommastellen"), Texts.parseAmount("12,5", "JPY"))
            Texts.locale = Locale.JAPAN
            assertEquals(Texts.AmountInput.Invalid("Enter an amount like 12"), Texts.parseAmount("12a", "JPY"))
            Texts.locale = Locale.US
            assertEquals(Texts.AmountInput.Invalid("JPY amounts have no decimal places"), Texts.parseAmount("1.000", "JPY"))
            assertEquals(Texts.AmountInput.Invalid("At most 3 decimal places for KWD"), Texts.parseAmount("1.0005", "KWD"))
            assertEquals(Texts.AmountInput.Invalid("Enter an amount like 12.500"), Texts.parseAmount("12,5", "KWD"))
            assertEquals(
                Texts.AmountInput.Invalid("\"1,000\" could mean 1,000.000 KWD or 1.000 KWD: type it without the separator, or with all decimals after \".\""),
                Texts.parseAmount("1,000", "KWD"),
            )
        } finally {
            Texts.locale = Locale.US
        }
    }

    /** Before: the data class printed `token=<the token>` wherever the account was logged. */
    @Test
    fun `a printed demo account never shows its token`() {
        val a = DemoAccount("http://10.0.2.2:8080", "usr_a", "tok-s3cret", "usr_b")
        for (printed in listOf(a.toString(), "$a", listOf(a).toString(), mapOf("account" to a).toString())) {
            assertTrue(!printed.contains("tok-s3cret") && printed.contains("usr_a"), printed)
        }
        assertEquals("tok-s3cret", a.token)
    }

    /** Before: nothing said a transfer's outcome to a screen reader, even one that ended in the background. */
    @Test
    fun `a transfer's outcome is announced in the locale, nothing while it is on its way`() {
        val poor = Rejection(RejectionReason.InsufficientFunds, "insufficient_funds", "", 402u)
        assertEquals("Sent: 12.50 BDT to usr_bob", Texts.announcement(transfer(TransferState.SUCCEEDED)))
        assertEquals(
            "Declined: 12.50 BDT to usr_bob — not enough money",
            Texts.announcement(transfer(TransferState.REJECTED, rejection = poor)),
        )
        assertEquals("Needs attention: 12.50 BDT to usr_bob", Texts.announcement(transfer(TransferState.NEEDS_ATTENTION)))
        for (s in listOf(TransferState.PENDING, TransferState.SENDING, TransferState.RETRYING, TransferState.AUTH_REQUIRED)) {
            assertNull(Texts.announcement(transfer(s)), "$s")
        }
        try {
            Texts.locale = Locale.GERMANY
            assertEquals("Gesendet: 12,50 BDT an usr_bob", Texts.announcement(transfer(TransferState.SUCCEEDED)))
        } finally {
            Texts.locale = Locale.US
        }
    }

    @Test
    fun `waiting line counts down in real seconds`() {
        val retrying = transfer(TransferState.RETRYING, attempts = 3u, nextAt = 10_500)
        assertEquals("Waiting for network — attempt 3, next try in 5s", Texts.waitingLine(retrying, false, 6_000))
        assertEquals("Waiting for network — attempt 3, next try in 0s", Texts.waitingLine(retrying, false, 11_000))
        // A clock running 10x: 4.5 s of SDK time is 0.45 s of real time.
        assertEquals("Waiting for network — attempt 3, next try in 1s", Texts.waitingLine(retrying, false, 6_000, 10.0))
        assertEquals(
            "Waiting for network — attempt 4, trying now",
            Texts.waitingLine(transfer(TransferState.SENDING, attempts = 4u), false, 0),
        )
        assertEquals(
            "Waiting for sign-in — attempt 2, the server refused the credentials",
            Texts.waitingLine(transfer(TransferState.AUTH_REQUIRED, attempts = 2u), true, 0),
        )
    }

    @Test
    fun `every state has a human label`() {
        val labels = TransferState.entries.associateWith {
            Texts.stateLabel(transfer(it, attempts = 2u, rejection = Rejection(RejectionReason.InsufficientFunds, "insufficient_funds", "", 402u)))
        }
        assertEquals("Queued", labels[TransferState.PENDING])
        assertEquals("Sending (attempt 2)", labels[TransferState.SENDING])
        assertEquals("Waiting for network (attempt 2)", labels[TransferState.RETRYING])
        assertEquals("Waiting for sign-in", labels[TransferState.AUTH_REQUIRED])
        assertEquals("Sent", labels[TransferState.SUCCEEDED])
        assertEquals("Declined — not enough money", labels[TransferState.REJECTED])
        assertEquals("Failed — not enough money", labels[TransferState.FAILED])
        assertEquals("Needs attention", labels[TransferState.NEEDS_ATTENTION])
    }

    @Test
    fun `typed errors have their own texts`() {
        assertEquals(
            "Invalid amount: enter more than 0 and at most ${Texts.money(SendOnce.maxAmountMinor, "BDT")}.",
            Texts.errorText(SendOnceException.InvalidAmount("invalid amount: too large"), "BDT"),
        )
        assertEquals("10,000,000,000.00 BDT", Texts.money(SendOnce.maxAmountMinor, "BDT"), "the SDK's limit")
        assertEquals(
            "Invalid recipient: a user id is 1 to 128 visible characters, without spaces.",
            Texts.errorText(SendOnceException.InvalidRecipient("x"), "BDT"),
        )
        val t = transfer(TransferState.REJECTED)
        assertEquals(
            "The server said no (409 weird_code). Nothing was sent.",
            Texts.rejectionText(Rejection(RejectionReason.Other("weird_code"), "weird_code", "odd", 409u), t),
        )
        // The typed reason decides, not the code string: a reason with an odd code still reads as itself.
        assertEquals(
            "Not enough money: your balance is lower than 12.50 BDT. Nothing was sent.",
            Texts.rejectionText(Rejection(RejectionReason.InsufficientFunds, "legacy_nsf", "", 402u), t),
        )
    }

    @Test
    fun `the demo's own texts come from the locale's resources, money in the locale`() {
        try {
            Texts.locale = Locale.GERMANY
            assertEquals("12,50 BDT an usr_bob", Texts.title(transfer(TransferState.SUCCEEDED)))
            assertEquals("Gesendet", Texts.stateLabel(transfer(TransferState.SUCCEEDED)))
            assertEquals("In der Warteschlange", Texts.stateLabel(transfer(TransferState.PENDING)))
            assertEquals("Warte auf Netz — Versuch 2, nächster in 3 s", Texts.waitingLine(transfer(TransferState.RETRYING, 2u, nextAt = 3_000), false, 0))
            assertEquals("Geben Sie einen Betrag ein", Texts.validation("usr_bob", "", "BDT"))
            assertEquals("Offline", TrainMode.OFFLINE.label)
            assertEquals("Gar kein Netz: Überweisungen warten und werden erneut versucht.", TrainMode.OFFLINE.description)
            // No German text: the English one, never the key.
            assertEquals("Needs attention", Texts.stateLabel(transfer(TransferState.NEEDS_ATTENTION)))
        } finally {
            Texts.locale = Locale.US
        }
        assertEquals("Off", TrainMode.OFF.label)
        assertEquals("12.50 BDT to usr_bob", Texts.title(transfer(TransferState.SUCCEEDED)))
    }

    @Test
    fun `every demo key the view model uses has an English text`() {
        val english = ResourceBundle.getBundle("io.sendonce.demo.strings", Locale.ROOT)
        val used = File("src/main/kotlin").walk().filter { it.extension == "kt" }
            .flatMap { Regex("\"(demo\\.[a-z_.]+[a-z_])\"").findAll(it.readText()).map { m -> m.groupValues[1] } }.toSet()
        assertTrue(used.size > 30, "found $used")
        assertEquals(emptyList<String>(), used.filterNot(english::containsKey), "keys without a text")
        for (mode in TrainMode.entries) assertTrue(english.containsKey("demo.train.${mode.name.lowercase()}"), "$mode")
    }

    @Test
    fun `the texts of the SDK's keys come from the locale's resources`() {
        val t = transfer(TransferState.REJECTED)
        val poor = Rejection(RejectionReason.InsufficientFunds, "insufficient_funds", "", 402u)
        try {
            Texts.locale = Locale.GERMANY
            assertEquals("Nicht genug Geld: Ihr Guthaben ist kleiner als 12,50 BDT. Nichts wurde gesendet.", Texts.rejectionText(poor, t))
            assertEquals("Abgelehnt — nicht genug Geld", Texts.stateLabel(transfer(TransferState.REJECTED, rejection = poor)))
            // A key without a German text falls back to the English one.
            assertEquals("The previous transfer is still on its way.", Texts.errorText(SendOnceException.TransferUnfinished(), "BDT"))
        } finally {
            Texts.locale = Locale.US
        }
        assertEquals("Something went wrong (sendonce.error.internal).", Texts.errorText(SendOnceException.Internal("bug"), "BDT"))
        assertEquals(
            "Failed — card blocked",
            Texts.stateLabel(transfer(TransferState.FAILED, rejection = Rejection(RejectionReason.Other("card_blocked"), "card_blocked", "", 402u))),
        )
    }
}
