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

    /// 1250, "BDT" → "12.50 BDT" in English, "12,50 BDT" in German: the amount in the locale, then the code.
    public static func money(_ minor: Int64, _ currency: String) -> String { "\(amount(minor, currency)) \(currency)" }

    /// 1250, "BDT" → "12.50" in English, "12,50" in German: the number alone, with the currency's own decimals.
    public static func amount(_ minor: Int64, _ currency: String) -> String {
        let n = AmountReader.minorDigits(currency)
        let f = NumberFormatter()
        f.locale = locale
        f.numberStyle = .decimal
        f.usesGroupingSeparator = true
        f.minimumFractionDigits = n
        f.maximumFractionDigits = n
        let amount = NSDecimalNumber(mantissa: minor.magnitude, exponent: Int16(-n), isNegative: minor < 0)
        return f.string(from: amount) ?? "\(minor)"
    }

    /// The result of reading the amount field.
    public enum AmountInput: Equatable {
        case valid(Int64)
        case invalid(String)
    }

    /// The amount field in `currency`'s minor units, read by `locale` (AmountReader's rules: "12,50" is 1250 in
    /// German and malformed in English; "1.000" is refused for JPY; a lone "1,000" is refused as ambiguous for
    /// KWD). Only the format is checked here (and that it is above zero); limits are the SDK's decision (a too
    /// large amount comes back as the typed `InvalidAmount`).
    public static func parseAmount(_ text: String, currency: String) -> AmountInput {
        switch AmountReader.read(text, locale: locale, currency: currency) {
        case let .minor(minor): return .valid(minor)
        case .empty: return .invalid(Texts.text("demo.validation.amount_empty"))
        case .malformed: return .invalid(Texts.text("demo.validation.amount_format", amount(example(currency), currency)))
        case let .tooManyDecimals(allowed) where allowed == 0:
            return .invalid(Texts.text("demo.validation.amount_no_decimals", currency))
        case let .tooManyDecimals(allowed): return .invalid(Texts.text("demo.validation.amount_decimals", String(allowed), currency))
        case let .ambiguous(asGrouping, asDecimal):
            let f = NumberFormatter()
            f.locale = locale
            return .invalid(Texts.text(
                "demo.validation.amount_ambiguous", text.trimmingCharacters(in: .whitespaces), money(asGrouping, currency),
                money(asDecimal, currency), f.decimalSeparator ?? "."
            ))
        case .zero: return .invalid(Texts.text("demo.validation.amount_zero"))
        }
    }

    /// The amount the format hint shows: twelve and a half units (twelve for a currency without decimals).
    private static func example(_ currency: String) -> Int64 {
        let n = AmountReader.minorDigits(currency)
        if n == 0 { return 12 }
        var scale: Int64 = 1
        for _ in 0..<n { scale *= 10 }
        return 12 * scale + scale / 2
    }

    /// The live validation text of the form, or nil when it is valid.
    public static func validation(recipient: String, amount: String, currency: String) -> String? {
        let r = recipient.trimmingCharacters(in: .whitespaces)
        if r.isEmpty { return text("demo.validation.recipient_empty") }
        if r.contains(where: { $0.isWhitespace }) { return text("demo.validation.recipient_spaces") }
        if case let .invalid(text) = parseAmount(amount, currency: currency) { return text }
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

    /// What a screen reader announces when `t` reaches an outcome, also one sent in the background while the
    /// user was elsewhere ("Sent: 12.50 BDT to usr_bob"); nil while it is on its way. The shell announces each
    /// transfer's text once (VoiceOver's announcement notification, TalkBack's announceForAccessibility).
    public static func announcement(_ t: Transfer) -> String? {
        switch t.state {
        case .succeeded: return text("demo.announce.succeeded", title(t))
        case .rejected, .failed: return text("demo.announce.declined", title(t), shortReason(t.rejection))
        case .needsAttention, .requiresAction: return text("demo.announce.needs_attention", title(t))
        default: return nil
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
