// Every string the demo shows, as pure functions of SDK values (tested without a server).
package io.sendonce.demo

import io.sendonce.Rejection
import io.sendonce.RejectionReason
import io.sendonce.SendOnce
import io.sendonce.SendOnceException
import io.sendonce.Transfer
import io.sendonce.TransferState
import io.sendonce.messageKey
import java.math.BigDecimal
import java.text.NumberFormat
import java.util.Currency
import java.util.Locale
import kotlin.math.ceil

object Texts {
    /**
     * The locale money is formatted in: the device's (Android: the configuration's locale). Tests pin it.
     * Grouping and the decimal separator follow it; the number of decimals is the currency's own.
     */
    @Volatile
    var locale: Locale = Locale.getDefault()

    /** Decimals of a currency's minor unit (2 for BDT, 0 for JPY); 2 for a code the JDK does not know. */
    private fun digits(currency: String): Int =
        runCatching { Currency.getInstance(currency).defaultFractionDigits }.getOrNull()?.takeIf { it >= 0 } ?: 2

    /** 1250, "BDT" → "12.50 BDT" in English, "12,50 BDT" in German: the amount in the locale, then the code. */
    fun money(minor: Long, currency: String): String {
        val n = digits(currency)
        val format = NumberFormat.getNumberInstance(locale).apply {
            minimumFractionDigits = n
            maximumFractionDigits = n
            isGroupingUsed = true
        }
        return "${format.format(BigDecimal.valueOf(minor).movePointLeft(n))} $currency"
    }

    /** The result of reading the amount field. */
    sealed interface AmountInput {
        data class Valid(val minor: Long) : AmountInput
        data class Invalid(val text: String) : AmountInput
    }

    /**
     * "12.5" → 1250 minor units. Only the format is checked here (and that it is above zero); limits are the
     * SDK's decision (a too large amount comes back as the typed `InvalidAmount`).
     */
    fun parseAmount(text: String): AmountInput {
        val t = text.trim().replace(",", "")
        if (t.isEmpty()) return AmountInput.Invalid("Enter an amount")
        if (!Regex("""\d{1,15}(\.\d*)?|\.\d+""").matches(t)) return AmountInput.Invalid("Enter an amount like 12.50")
        val value = BigDecimal(t)
        if (value.stripTrailingZeros().scale() > 2) return AmountInput.Invalid("At most 2 decimal places")
        val minor = value.movePointRight(2).toBigIntegerExact().toLong()
        if (minor <= 0) return AmountInput.Invalid("The amount must be more than 0")
        return AmountInput.Valid(minor)
    }

    /** The live validation text of the form, or null when it is valid. */
    fun validation(recipient: String, amount: String): String? {
        if (recipient.isBlank()) return "Enter the recipient's user id"
        if (recipient.trim().any { it.isWhitespace() }) return "A user id has no spaces"
        return (parseAmount(amount) as? AmountInput.Invalid)?.text
    }

    fun title(t: Transfer): String = "${money(t.amountMinor, t.currency)} to ${t.toUserId}"

    /**
     * The line under the spinner while the SDK waits to retry. [sdkNowMs] is "now" on the SDK's clock and
     * [clockSpeed] how much faster than real time it runs (1 on a device), so X is in real seconds.
     */
    fun waitingLine(t: Transfer, needsAuth: Boolean, sdkNowMs: Long, clockSpeed: Double = 1.0): String {
        val n = t.attempts.toInt()
        if (needsAuth) return "Waiting for sign-in — attempt $n, the server refused the credentials"
        if (t.state == TransferState.SENDING) return "Waiting for network — attempt $n, trying now"
        val next = t.nextAttemptAt?.toEpochMilli() ?: sdkNowMs
        val seconds = ceil((next - sdkNowMs).coerceAtLeast(0) / clockSpeed / 1000.0).toLong()
        return "Waiting for network — attempt $n, next try in ${seconds}s"
    }

    /** The human label of a transfer's state in the recent list. */
    fun stateLabel(t: Transfer): String = when (t.state) {
        TransferState.PENDING -> "Queued"
        TransferState.SENDING -> if (t.attempts <= 1u) "Sending" else "Sending (attempt ${t.attempts})"
        TransferState.RETRYING -> "Waiting for network (attempt ${t.attempts})"
        TransferState.AUTH_REQUIRED -> "Waiting for sign-in"
        TransferState.SUCCEEDED -> "Sent"
        TransferState.REJECTED -> "Declined — ${shortReason(t.rejection)}"
        TransferState.FAILED -> "Failed — ${shortReason(t.rejection)}"
        TransferState.NEEDS_ATTENTION -> "Needs attention"
    }

    /** Switches over the SDK's typed reason; only a code newer than the bindings falls back to the code. */
    private fun shortReason(r: Rejection?): String = when (val reason = r?.reason) {
        RejectionReason.InsufficientFunds -> "not enough money"
        RejectionReason.RecipientNotFound -> "unknown recipient"
        RejectionReason.RecipientLimitReached -> "recipient's wallet is full"
        RejectionReason.KeyReused -> "key reused"
        RejectionReason.NotExecuted -> "never reached the server"
        RejectionReason.InvalidRequest -> "invalid request"
        is RejectionReason.Other -> reason.code.ifEmpty { "refused" }.replace('_', ' ')
        null -> "refused"
    }

    /** The text of a definitive no (composer state Rejected: a Rejected or Failed transfer). */
    fun rejectionText(rejection: Rejection, t: Transfer): String = when (val reason = rejection.reason) {
        RejectionReason.InsufficientFunds ->
            "Not enough money: your balance is lower than ${money(t.amountMinor, t.currency)}. Nothing was sent."
        RejectionReason.RecipientNotFound ->
            "Unknown recipient: no account has the id ${t.toUserId}. Nothing was sent."
        RejectionReason.RecipientLimitReached ->
            "The recipient's wallet cannot hold ${money(t.amountMinor, t.currency)} more. Nothing was sent."
        RejectionReason.KeyReused ->
            "Refused: this transfer's key was already used for a different request (key reused). " +
                "No money moved twice. This is a bug in the app — please report it."
        RejectionReason.NotExecuted ->
            "The server never received this transfer. No money moved."
        RejectionReason.InvalidRequest ->
            "The server refused the request as invalid. Nothing was sent."
        is RejectionReason.Other ->
            "The server said no (${rejection.httpStatus} ${reason.code}). Nothing was sent."
    }

    const val NEEDS_ATTENTION =
        "Needs attention: this transfer could not be confirmed for too long, so the app stopped retrying. " +
            "It will never be sent twice; tap Check again to ask the server what happened."

    /** The text of a typed error thrown by a Send tap. */
    fun errorText(e: SendOnceException, currency: String): String = when (e) {
        is SendOnceException.InvalidAmount ->
            "Invalid amount: enter more than 0 and at most ${money(SendOnce.maxAmountMinor, currency)}."
        is SendOnceException.InvalidRecipient ->
            "Invalid recipient: a user id is 1 to 128 visible characters, without spaces."
        is SendOnceException.InvalidCurrency -> "Invalid currency: $currency is not supported."
        is SendOnceException.InvalidNote -> "Invalid note: at most 140 characters."
        is SendOnceException.Closed -> "The app is reconnecting; tap Send again in a moment."
        is SendOnceException.StorageFull -> "Your phone's storage is full: free some space, then tap Send again."
        is SendOnceException.StorageCorrupt, is SendOnceException.StorageUnavailable ->
            "The app cannot save transfers. Nothing was sent."
        is SendOnceException.TransferUnfinished -> "The previous transfer is still on its way."
        is SendOnceException.LookupFailed -> "Could not reach the server to check. Try again later."
        else -> "Something went wrong (${e.messageKey})."
    }
}
