// Every string the demo shows, as pure functions of SDK values (tested without a server), the same texts
// as the Android demo's Texts.kt. Every text comes from Resources/<lang>.lproj/Localizable.strings: the
// SDK's errors and rejection reasons by the SDK's keys, the demo's own by `demo.*` keys; money in the locale.
import Foundation
import SendOnce

public enum Texts {
    /// Why the demo could not set itself up against the server at `url`.
    public static func setupText(_ url: String, _ e: Error, currency: String) -> String {
        if let http = e as? HTTPStatusError {
            if http.status == 404 { return text("demo.setup.no_test_api", url) }
            return text("demo.setup.status", url, String(http.status))
        }
        if e is SendOnceError { return errorText(e, currency: currency) }
        return text("demo.setup.unreachable", url)
    }

    /// The locale money is formatted in: the device's. Tests pin it.
    nonisolated(unsafe) public static var locale = Locale.current

    /// Decimals of a currency's minor unit (2 for BDT, 0 for JPY, 3 for KWD); 2 for an unknown code.
    static func digits(_ currency: String) -> Int {
        // ICU knows each ISO 4217 currency's minor unit: count the decimals it writes for one unit.
        let f = NumberFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.numberStyle = .currency
        f.currencyCode = currency
        guard let one = f.string(from: 1), let dot = one.firstIndex(of: ".") else { return 0 }
        return one[one.index(after: dot)...].prefix { $0.isNumber }.count
    }

    /// 1250, "BDT" → "12.50 BDT" in English, "12,50 BDT" in German: the amount in the locale, then the code.
    public static func money(_ minor: Int64, _ currency: String) -> String {
        let n = digits(currency)
        let f = NumberFormatter()
        f.locale = locale
        f.numberStyle = .decimal
        f.usesGroupingSeparator = true
        f.minimumFractionDigits = n
        f.maximumFractionDigits = n
        let amount = NSDecimalNumber(mantissa: minor.magnitude, exponent: Int16(-n), isNegative: minor < 0)
        return "\(f.string(from: amount) ?? "\(minor)") \(currency)"
    }

    /// The result of reading the amount field.
    public enum AmountInput: Equatable {
        case valid(Int64)
        case invalid(String)
    }

    /// "12.5" → 1250 minor units. Only the format is checked here (and that it is above zero); limits are
    /// the SDK's decision (a too large amount comes back as the typed `InvalidAmount`).
    public static func parseAmount(_ text: String) -> AmountInput {
        let t = text.trimmingCharacters(in: .whitespaces).replacingOccurrences(of: ",", with: "")
        if t.isEmpty { return .invalid(Texts.text("demo.validation.amount_empty")) }
        let parts = t.split(separator: ".", omittingEmptySubsequences: false)
        let digits = { (s: Substring) in s.allSatisfy { $0 >= "0" && $0 <= "9" } }
        guard parts.count <= 2, parts.allSatisfy(digits), parts[0].count <= 15,
              !(parts[0].isEmpty && (parts.count == 1 || parts[1].isEmpty))
        else { return .invalid(Texts.text("demo.validation.amount_format")) }
        var fraction = parts.count == 2 ? String(parts[1]) : ""
        while fraction.hasSuffix("0") { fraction.removeLast() }
        if fraction.count > 2 { return .invalid(Texts.text("demo.validation.amount_decimals")) }
        while fraction.count < 2 { fraction += "0" }
        let minor = (Int64(parts[0]) ?? 0) * 100 + Int64(fraction)!
        if minor <= 0 { return .invalid(Texts.text("demo.validation.amount_zero")) }
        return .valid(minor)
    }

    /// The live validation text of the form, or nil when it is valid.
    public static func validation(recipient: String, amount: String) -> String? {
        let r = recipient.trimmingCharacters(in: .whitespaces)
        if r.isEmpty { return text("demo.validation.recipient_empty") }
        if r.contains(where: { $0.isWhitespace }) { return text("demo.validation.recipient_spaces") }
        if case let .invalid(text) = parseAmount(amount) { return text }
        return nil
    }

    public static func title(_ t: Transfer) -> String { text("demo.title", money(t.amountMinor, t.currency), t.toUserId) }

    /// The line under the spinner while the SDK waits to retry. `sdkNowMs` is "now" on the SDK's clock and
    /// `clockSpeed` how much faster than real time it runs (1 on a device), so X is in real seconds.
    public static func waitingLine(_ t: Transfer, needsAuth: Bool, sdkNowMs: Int64, clockSpeed: Double = 1) -> String {
        let n = String(t.attempts)
        if needsAuth { return text("demo.waiting.auth", n) }
        if t.state == .sending { return text("demo.waiting.now", n) }
        let next = t.nextAttemptAt.map { Int64(($0.timeIntervalSince1970 * 1000).rounded()) } ?? sdkNowMs
        let seconds = Int64((Double(max(0, next - sdkNowMs)) / clockSpeed / 1000).rounded(.up))
        return text("demo.waiting.next", n, String(seconds))
    }

    /// The human label of a transfer's state in the recent list.
    public static func stateLabel(_ t: Transfer) -> String {
        switch t.state {
        case .pending: return text("demo.state.pending")
        case .sending: return t.attempts <= 1 ? text("demo.state.sending") : text("demo.state.sending_attempt", String(t.attempts))
        case .retrying: return text("demo.state.retrying", String(t.attempts))
        case .authRequired: return text("demo.state.auth_required")
        case .succeeded: return text("demo.state.succeeded")
        case .rejected: return text("demo.state.rejected", shortReason(t.rejection))
        case .failed: return text("demo.state.failed", shortReason(t.rejection))
        case .needsAttention, .requiresAction: return text("demo.state.needs_attention")
        }
    }

    /// The demo's text for one of the SDK's message keys, from `Resources/<lang>.lproj/Localizable.strings`
    /// of `locale`'s language (English when it has none or lacks the key), with `args` as `%1$@`, `%2$@`, ...
    static func text(_ key: String, fallback: String, _ args: String...) -> String {
        text(key, fallback: fallback, args: args)
    }

    /// The demo's own text `key` (a `demo.*` key of `Localizable.strings`) in `locale`'s language, with `args`.
    public static func text(_ key: String, _ args: String...) -> String {
        text(key, fallback: key, args: args)
    }

    private static func text(_ key: String, fallback: String, args: [String]) -> String {
        let language = locale.identifier.split(whereSeparator: { $0 == "_" || $0 == "-" }).first.map(String.init) ?? "en"
        let english = Bundle.module.path(forResource: "en", ofType: "lproj").flatMap(Bundle.init(path:))
        let localized = Bundle.module.path(forResource: language, ofType: "lproj").flatMap(Bundle.init(path:))
        let missing = "\u{0}"
        var pattern = missing
        for bundle in [localized, english].compactMap({ $0 }) where pattern == missing {
            for k in [key, fallback] where pattern == missing {
                let found = bundle.localizedString(forKey: k, value: missing, table: nil)
                if found != missing { pattern = found }
            }
        }
        if pattern == missing { return key }
        // Positional arguments by hand: Linux Foundation's String(format:) ignores the `n$` of `%n$@`.
        return args.enumerated().reduce(pattern) { text, arg in
            text.replacingOccurrences(of: "%\(arg.offset + 1)$@", with: arg.element)
        }
    }

    /// The SDK's typed reason picks the text; only a code newer than the bindings falls back to the code.
    static func shortReason(_ r: Rejection?) -> String {
        let refused = text("demo.short.refused")
        guard let reason = r?.reason else { return refused }
        var code = ""
        if case let .other(c) = reason { code = c.isEmpty ? refused : c.replacingOccurrences(of: "_", with: " ") }
        return text("short.\(reason.messageKey)", fallback: "short.sendonce.rejection.other", "", "", "", code)
    }

    /// The text of a definitive no (composer state Rejected: a Rejected or Failed transfer).
    public static func rejectionText(_ rejection: Rejection, _ t: Transfer) -> String {
        var code = rejection.code
        if case let .other(c) = rejection.reason { code = c }
        return text(
            rejection.reason.messageKey, fallback: "sendonce.rejection.other",
            money(t.amountMinor, t.currency), t.toUserId, String(rejection.httpStatus), code
        )
    }

    /// The text of a transfer handed to the user as Needs attention.
    public static var needsAttention: String { text("demo.needs_attention") }

    /// The text of a typed error thrown by a Send tap, looked up by the SDK's message key.
    public static func errorText(_ e: Error, currency: String) -> String {
        guard let e = e as? SendOnceError else { return text("demo.error.other", String(describing: e)) }
        return text(e.messageKey, fallback: "sendonce.error.other", money(SendOnce.maxAmountMinor, currency), currency, e.messageKey)
    }
}
