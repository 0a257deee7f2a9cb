// Reads the amount field into minor units by the user's locale and the currency's own minor unit (ISO 4217).
// No texts here: Texts words each outcome. The same rules as the iOS demo's AmountReader.swift.
package io.sendonce.demo

import java.math.BigInteger
import java.text.DecimalFormatSymbols
import java.util.Currency
import java.util.Locale

/** What the amount field holds. */
sealed interface AmountReading {
    /** A valid amount above zero, in the currency's minor units. */
    data class Minor(val minor: Long) : AmountReading

    /** Nothing typed. */
    data object Empty : AmountReading

    /** Not a number in this locale: a stray character, a separator in the wrong place, too many digits. */
    data object Malformed : AmountReading

    /** More decimals than the currency has ([allowed] is its minor unit: 0 for JPY, 3 for KWD). */
    data class TooManyDecimals(val allowed: Int) : AmountReading

    /**
     * A lone thousands separator followed by three digits in a currency with three or more decimals: the
     * locale reads [asGrouping], a user used to the other convention meant [asDecimal]. Refused, never guessed.
     */
    data class Ambiguous(val asGrouping: Long, val asDecimal: Long) : AmountReading

    /** Zero (the SDK refuses it too; said here before the confirm step). */
    data object Zero : AmountReading
}

/**
 * The rules: the locale's decimal separator is a decimal point (at most once; after it only digits, at most the
 * currency's minor unit of them, trailing zeros included, so "1.000" is never one yen); the locale's grouping
 * separator is allowed only between groups of three digits (a space-like grouping separator also accepts a
 * typed space); anything else is malformed. Limits are the SDK's decision, except 15 integer digits (no overflow).
 */
object AmountReader {
    /** At most this many integer digits (the SDK's own limit is far below; this only keeps the sum exact). */
    const val MAX_INTEGER_DIGITS = 15

    /** Decimals of a currency's minor unit (ISO 4217: 2 for BDT, 0 for JPY, 3 for KWD); 2 for a code the JDK does not know. */
    fun minorDigits(currency: String): Int =
        runCatching { Currency.getInstance(currency).defaultFractionDigits }.getOrNull()?.takeIf { it >= 0 } ?: 2

    /** Reads [text] as typed by a user of [locale] for an amount in [currency]. */
    fun read(text: String, locale: Locale, currency: String): AmountReading {
        val symbols = DecimalFormatSymbols.getInstance(locale)
        return read(text, symbols.decimalSeparator, symbols.groupingSeparator, minorDigits(currency))
    }

    /** Reads [text] with the separators [decimal] and [grouping] for a currency of [digits] decimals. */
    fun read(text: String, decimal: Char, grouping: Char, digits: Int): AmountReading {
        val t = text.trim()
        if (t.isEmpty()) return AmountReading.Empty
        val point = t.indexOf(decimal)
        if (point >= 0 && t.indexOf(decimal, point + 1) >= 0) return AmountReading.Malformed
        val whole = if (point >= 0) t.substring(0, point) else t
        val fraction = if (point >= 0) t.substring(point + 1) else ""
        if (!fraction.all(::isDigit)) return AmountReading.Malformed
        val spaceLike = grouping.isWhitespace()
        val groups = splitGroups(whole) { it == grouping || (spaceLike && it.isWhitespace()) }
        if (groups.any { g -> !g.all(::isDigit) }) return AmountReading.Malformed
        if (groups.size > 1 && (groups[0].length !in 1..3 || groups.drop(1).any { it.length != 3 })) return AmountReading.Malformed
        val integer = groups.joinToString("")
        if (integer.isEmpty() && fraction.isEmpty()) return AmountReading.Malformed
        if (integer.trimStart('0').length > MAX_INTEGER_DIGITS) return AmountReading.Malformed
        if (fraction.length > digits) return AmountReading.TooManyDecimals(digits)
        val minor = toMinor(integer, fraction, digits)
        if (minor == 0L) return AmountReading.Zero
        if (point < 0 && groups.size == 2 && grouping in ".," && digits >= 3) {
            return AmountReading.Ambiguous(minor, toMinor(groups[0], groups[1], digits))
        }
        return AmountReading.Minor(minor)
    }

    private fun isDigit(c: Char) = c in '0'..'9'

    /** "1.250.000" → ["1", "250", "000"] (empty groups kept, so "1..2" is malformed). */
    private fun splitGroups(s: String, isSeparator: (Char) -> Boolean): List<String> {
        val groups = mutableListOf(StringBuilder())
        for (c in s) if (isSeparator(c)) groups += StringBuilder() else groups.last().append(c)
        return groups.map(StringBuilder::toString)
    }

    /** "12", "5", 2 → 1250. */
    private fun toMinor(integer: String, fraction: String, digits: Int): Long =
        BigInteger((integer.ifEmpty { "0" }) + fraction.padEnd(digits, '0')).toLong()
}
