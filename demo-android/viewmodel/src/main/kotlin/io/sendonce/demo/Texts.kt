// Every string the demo shows, as pure functions of SDK values (tested without a server). Every text comes
// from resources (strings*.properties): the SDK's errors and rejection reasons keyed by the SDK's keys, the
// demo's own texts by `demo.*` keys; money is formatted in the locale.
package io.sendonce.demo

import io.sendonce.core.Rejection
import io.sendonce.core.RejectionReason
import io.sendonce.SendOnce
import io.sendonce.SendOnceException
import io.sendonce.Transfer
import io.sendonce.core.TransferState
import io.sendonce.messageKey
import java.math.BigDecimal
import java.text.DecimalFormatSymbols
import java.text.MessageFormat
import java.text.NumberFormat
import java.util.Locale
import java.util.ResourceBundle
import kotlin.math.ceil

object Texts {
    /**
     * The locale money is formatted in: the device's (Android: the configuration's locale). Tests pin it.
     * Grouping and the decimal separator follow it; the number of decimals is the currency's own.
     */
    @Volatile
    var locale: Locale = Locale.getDefault()

    /** 1250, "BDT" → "12.50 BDT" in English, "12,50 BDT" in German: the amount in the locale, then the code. */
    fun money(minor: Long, currency: String): String = "${amount(minor, currency)} $currency"

    /** 1250, "BDT" → "12.50" in English, "12,50" in German: the number alone, with the currency's own decimals. */
    fun amount(minor: Long, currency: String): String {
        val n = AmountReader.minorDigits(currency)
        val format = NumberFormat.getNumberInstance(locale).apply {
            minimumFractionDigits = n
            maximumFractionDigits = n
            isGroupingUsed = true
        }
        return format.format(BigDecimal.valueOf(minor).movePointLeft(n))
    }

    /** The result of reading the amount field. */
    sealed interface AmountInput {
        data class Valid(val minor: Long) : AmountInput
        data class Invalid(val text: String) : AmountInput
    }

    /**
     * The amount field in [currency]'s minor units, read by [locale] (AmountReader's rules: "12,50" is 1250 in
     * German and malformed in English; "1.000" is refused for JPY; a lone "1,000" is refused as ambiguous for
     * KWD). Only the format is checked here (and that it is above zero); limits are the SDK's decision (a too
     * large amount comes back as the typed `InvalidAmount`).
     */
    fun parseAmount(text: String, currency: String): AmountInput = when (val r = AmountReader.read(text, locale, currency)) {
        is AmountReading.Minor -> AmountInput.Valid(r.minor)
        AmountReading.Empty -> AmountInput.Invalid(text("demo.validation.amount_empty"))
        AmountReading.Malformed -> AmountInput.Invalid(text("demo.validation.amount_format", amount(example(currency), currency)))
        is AmountReading.TooManyDecimals -> AmountInput.Invalid(
            if (r.allowed == 0) text("demo.validation.amount_no_decimals", currency)
            else text("demo.validation.amount_decimals", r.allowed, currency),
        )
        is AmountReading.Ambiguous -> AmountInput.Invalid(
            text(
                "demo.validation.amount_ambiguous", text.trim(), money(r.asGrouping, currency), money(r.asDecimal, currency),
                DecimalFormatSymbols.getInstance(locale).decimalSeparator.toString(),
            ),
        )
        AmountReading.Zero -> AmountInput.Invalid(text("demo.validation.amount_zero"))
    }

    /** The amount the format hint shows: twelve and a half units (twelve for a currency without decimals). */
    private fun example(currency: String): Long {
        val n = AmountReader.minorDigits(currency)
        return if (n == 0) 12 else BigDecimal("12.5").movePointRight(n).toLong()
    }

    /** The live validation text of the form, or null when it is valid. */
    fun validation(recipient: String, amount: String, currency: String): String? {
        if (recipient.isBlank()) return text("demo.validation.recipient_empty")
        if (recipient.trim().any { it.isWhitespace() }) return text("demo.validation.recipient_spaces")
        return (parseAmount(amount, currency) as? AmountInput.Invalid)?.text
    }

    fun title(t: Transfer): String = text("demo.title", money(t.amountMinor, t.currency), t.toUserId)

    /**
     * The line under the spinner while the SDK waits to retry. [sdkNowMs] is "now" on the SDK's clock and
     * [clockSpeed] how much faster than real time it runs (1 on a device), so X is in real seconds.
     */
    fun waitingLine(t: Transfer, needsAuth: Boolean, sdkNowMs: Long, clockSpeed: Double = 1.0): String {
        val n = t.attempts.toInt()
        if (needsAuth) return text("demo.waiting.auth", n)
        if (t.state == TransferState.SENDING) return text("demo.waiting.now", n)
        val next = t.nextAttemptAt?.toEpochMilli() ?: sdkNowMs
        val seconds = ceil((next - sdkNowMs).coerceAtLeast(0) / clockSpeed / 1000.0).toLong()
        return text("demo.waiting.next", n, seconds)
    }

    /** The human label of a transfer's state in the recent list. */
    fun stateLabel(t: Transfer): String = when (t.state) {
        TransferState.PENDING -> text("demo.state.pending")
        TransferState.SENDING -> if (t.attempts <= 1u) text("demo.state.sending") else text("demo.state.sending_attempt", t.attempts.toLong())
        TransferState.RETRYING -> text("demo.state.retrying", t.attempts.toLong())
        TransferState.AUTH_REQUIRED -> text("demo.state.auth_required")
        TransferState.SUCCEEDED -> text("demo.state.succeeded")
        TransferState.REJECTED -> text("demo.state.rejected", shortReason(t.rejection))
        TransferState.FAILED -> text("demo.state.failed", shortReason(t.rejection))
        TransferState.NEEDS_ATTENTION, TransferState.REQUIRES_ACTION -> text("demo.state.needs_attention")
    }

    /**
     * What a screen reader announces when [t] reaches an outcome, also one sent in the background while the
     * user was elsewhere ("Sent: 12.50 BDT to usr_bob"); null while it is on its way. The shell announces each
     * transfer's text once (TalkBack `announceForAccessibility`, VoiceOver's announcement notification).
     */
    fun announcement(t: Transfer): String? = when (t.state) {
        TransferState.SUCCEEDED -> text("demo.announce.succeeded", title(t))
        TransferState.REJECTED, TransferState.FAILED -> text("demo.announce.declined", title(t), shortReason(t.rejection))
        TransferState.NEEDS_ATTENTION, TransferState.REQUIRES_ACTION -> text("demo.announce.needs_attention", title(t))
        else -> null
    }

    /**
     * The demo's text for one of the SDK's message keys, from `strings.properties` (or the locale's
     * `strings_<lang>.properties`), with [args] in MessageFormat's `{0}`, `{1}`, ...; [fallback]'s text
     * when the key has none.
     */
    private fun lookup(key: String, fallback: String, vararg args: Any): String {
        val bundle = ResourceBundle.getBundle(
            "io.sendonce.demo.strings", locale, ResourceBundle.Control.getNoFallbackControl(ResourceBundle.Control.FORMAT_PROPERTIES),
        )
        val pattern = when {
            bundle.containsKey(key) -> bundle.getString(key)
            bundle.containsKey(fallback) -> bundle.getString(fallback)
            else -> return key
        }
        return MessageFormat(pattern, locale).format(args.map { if (it is Number) it.toString() else it }.toTypedArray())
    }

    /** The demo's own text [key] (a `demo.*` key of `strings.properties`) in [locale], with [args]. */
    fun text(key: String, vararg args: Any): String = lookup(key, key, *args)

    /** The SDK's typed reason picks the text; only a code newer than the bindings falls back to the code. */
    private fun shortReason(r: Rejection?): String {
        val refused = text("demo.short.refused")
        val reason = r?.reason ?: return refused
        val code = (reason as? RejectionReason.Other)?.code?.ifEmpty { refused }?.replace('_', ' ') ?: ""
        return lookup("short.${reason.messageKey}", "short.sendonce.rejection.other", "", "", "", code)
    }

    /** The text of a definitive no (composer state Rejected: a Rejected or Failed transfer). */
    fun rejectionText(rejection: Rejection, t: Transfer): String {
        val code = (rejection.reason as? RejectionReason.Other)?.code ?: rejection.code
        return lookup(
            rejection.reason.messageKey, "sendonce.rejection.other",
            money(t.amountMinor, t.currency), t.toUserId, rejection.httpStatus.toString(), code,
        )
    }

    /** The text of a transfer handed to the user as Needs attention. */
    val needsAttention: String get() = text("demo.needs_attention")

    /** The text of a typed error thrown by a Send tap, looked up by the SDK's message key. */
    fun errorText(e: SendOnceException, currency: String): String =
        lookup(e.messageKey, "sendonce.error.other", money(SendOnce.maxAmountMinor, currency), currency, e.messageKey)
}
