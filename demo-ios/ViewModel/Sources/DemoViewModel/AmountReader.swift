// Reads the amount field into minor units by the user's locale and the currency's own minor unit (ISO 4217).
// No texts here: Texts words each outcome. The same rules as the Android demo's AmountReader.kt.
import Foundation

/// What the amount field holds.
public enum AmountReading: Equatable, Sendable {
    /// A valid amount above zero, in the currency's minor units.
    case minor(Int64)
    /// Nothing typed.
    case empty
    /// Not a number in this locale: a stray character, a separator in the wrong place, too many digits.
    case malformed
    /// More decimals than the currency has (`allowed` is its minor unit: 0 for JPY, 3 for KWD).
    case tooManyDecimals(allowed: Int)
    /// A lone thousands separator followed by three digits in a currency with three or more decimals: the
    /// locale reads `asGrouping`, a user used to the other convention meant `asDecimal`. Refused, never guessed.
    case ambiguous(asGrouping: Int64, asDecimal: Int64)
    /// Zero (the SDK refuses it too; said here before the confirm step).
    case zero
}

/// The rules: the locale's decimal separator is a decimal point (at most once; after it only digits, at most
/// the currency's minor unit of them, trailing zeros included, so "1.000" is never one yen); the locale's
/// grouping separator is allowed only between groups of three digits (a space-like grouping separator also
/// accepts a typed space); anything else is malformed. Limits are the SDK's decision, except 15 integer digits.
public enum AmountReader {
    /// At most this many integer digits (the SDK's own limit is far below; this only keeps the sum exact).
    public static let maxIntegerDigits = 15

    /// Decimals of a currency's minor unit (ISO 4217: 2 for BDT, 0 for JPY, 3 for KWD).
    public static func minorDigits(_ currency: String) -> Int {
        // ICU knows each ISO 4217 currency's minor unit: count the decimals it writes for one unit.
        let f = NumberFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.numberStyle = .currency
        f.currencyCode = currency
        guard let one = f.string(from: 1), let dot = one.firstIndex(of: ".") else { return 0 }
        return one[one.index(after: dot)...].prefix { $0.isNumber }.count
    }

    /// Reads `text` as typed by a user of `locale` for an amount in `currency`.
    public static func read(_ text: String, locale: Locale, currency: String) -> AmountReading {
        let f = NumberFormatter()
        f.locale = locale
        f.numberStyle = .decimal
        return read(
            text, decimal: (f.decimalSeparator ?? ".").first ?? ".", grouping: (f.groupingSeparator ?? ",").first ?? ",",
            digits: minorDigits(currency)
        )
    }

    /// Reads `text` with the separators `decimal` and `grouping` for a currency of `digits` decimals.
    public static func read(_ text: String, decimal: Character, grouping: Character, digits: Int) -> AmountReading {
        let t = text.trimmingCharacters(in: .whitespaces)
        if t.isEmpty { return .empty }
        let chars = Array(t)
        let points = chars.indices.filter { chars[$0] == decimal }
        if points.count > 1 { return .malformed }
        let point = points.first
        let whole = point.map { String(chars[..<$0]) } ?? t
        let fraction = point.map { String(chars[($0 + 1)...]) } ?? ""
        guard fraction.allSatisfy(isDigit) else { return .malformed }
        let spaceLike = grouping.isWhitespace
        let groups = whole.split(omittingEmptySubsequences: false) { $0 == grouping || (spaceLike && $0.isWhitespace) }
            .map(String.init)
        guard groups.allSatisfy({ $0.allSatisfy(isDigit) }) else { return .malformed }
        if groups.count > 1, !(1...3).contains(groups[0].count) || groups.dropFirst().contains(where: { $0.count != 3 }) {
            return .malformed
        }
        let integer = groups.joined()
        if integer.isEmpty && fraction.isEmpty { return .malformed }
        if integer.drop(while: { $0 == "0" }).count > maxIntegerDigits { return .malformed }
        if fraction.count > digits { return .tooManyDecimals(allowed: digits) }
        let minor = toMinor(integer, fraction, digits)
        if minor == 0 { return .zero }
        if point == nil, groups.count == 2, grouping == "." || grouping == ",", digits >= 3 {
            return .ambiguous(asGrouping: minor, asDecimal: toMinor(groups[0], groups[1], digits))
        }
        return .minor(minor)
    }

    private static func isDigit(_ c: Character) -> Bool { c.isASCII && c.isNumber }

    /// "12", "5", 2 → 1250 (at most 15 + 3 digits: no overflow).
    private static func toMinor(_ integer: String, _ fraction: String, _ digits: Int) -> Int64 {
        let all = (integer + fraction + String(repeating: "0", count: digits - fraction.count)).drop { $0 == "0" }
        return Int64(all.isEmpty ? "0" : String(all)) ?? 0
    }
}
