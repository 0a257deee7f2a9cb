import XCTest
import SendOnce
@testable import DemoViewModel

/// The pure text functions, without a server (the same expectations as the Android demo's TextsTest).
final class TextsTests: XCTestCase {
    override func setUp() {
        super.setUp()
        Texts.locale = Locale(identifier: "en_US")
    }

    func transfer(_ state: TransferState, attempts: UInt32 = 1, nextAt: Int64? = nil, rejection: Rejection? = nil) -> Transfer {
        Transfer(
            localId: "l1", idempotencyKey: "k1", toUserId: "usr_bob", amountMinor: 1250, currency: "BDT", note: nil,
            state: state, attempts: attempts, createdAt: Date(timeIntervalSince1970: 0), updatedAt: Date(timeIntervalSince1970: 0),
            lastAttemptAt: nil, nextAttemptAt: nextAt.map { Date(timeIntervalSince1970: Double($0) / 1000) }, lastError: nil,
            serverTransferId: nil, rejection: rejection, replayed: false,
            operationType: "transfer", requiredAction: nil
        )
    }

    func testMoneyFollowsTheLocaleAndTheCurrencysOwnDecimals() {
        Texts.locale = Locale(identifier: "de_DE")
        XCTAssertEqual(Texts.money(1_000_000, "BDT"), "10.000,00 BDT")
        Texts.locale = Locale(identifier: "en_US")
        XCTAssertEqual(Texts.money(1250, "JPY"), "1,250 JPY", "yen have no minor unit")
        XCTAssertEqual(Texts.money(1250, "KWD"), "1.250 KWD", "dinars have three decimals")
    }

    func testMoneyIsFormattedWithGroupingAndTwoDecimals() {
        XCTAssertEqual(Texts.money(1250, "BDT"), "12.50 BDT")
        XCTAssertEqual(Texts.money(1_000_000, "BDT"), "10,000.00 BDT")
        XCTAssertEqual(Texts.money(5, "BDT"), "0.05 BDT")
        XCTAssertEqual(Texts.money(SendOnce.maxAmountMinor, "BDT"), "10,000,000,000.00 BDT", "the SDK's limit")
    }

    func testAmountParsingAndValidationTexts() {
        XCTAssertEqual(Texts.parseAmount("12.5", currency: "BDT"), .valid(1250))
        XCTAssertEqual(Texts.parseAmount(" 1,000 ", currency: "BDT"), .valid(100_000))
        XCTAssertEqual(Texts.parseAmount(".5", currency: "BDT"), .valid(50))
        XCTAssertEqual(Texts.parseAmount("", currency: "BDT"), .invalid("Enter an amount"))
        XCTAssertEqual(Texts.parseAmount("12a", currency: "BDT"), .invalid("Enter an amount like 12.50"))
        XCTAssertEqual(Texts.parseAmount("-3", currency: "BDT"), .invalid("Enter an amount like 12.50"))
        XCTAssertEqual(Texts.parseAmount(".", currency: "BDT"), .invalid("Enter an amount like 12.50"))
        XCTAssertEqual(Texts.parseAmount("1.234", currency: "BDT"), .invalid("At most 2 decimal places for BDT"))
        XCTAssertEqual(Texts.parseAmount("0.00", currency: "BDT"), .invalid("The amount must be more than 0"))
        XCTAssertEqual(Texts.validation(recipient: " ", amount: "12", currency: "BDT"), "Enter the recipient's user id")
        XCTAssertEqual(Texts.validation(recipient: "usr a", amount: "12", currency: "BDT"), "A user id has no spaces")
        XCTAssertNil(Texts.validation(recipient: "usr_bob", amount: "12", currency: "BDT"))
    }

    /// The field by the user's locale and the currency's minor unit (ISO 4217: JPY 0, BDT 2, KWD 3). Before,
    /// commas were stripped and two decimals assumed: "12,50" typed in German became 1,250.00 (100x).
    func testAmountsAreReadByTheLocaleAndTheCurrencysOwnMinorUnit() {
        let de = Locale(identifier: "de_DE"), en = Locale(identifier: "en_US"), ja = Locale(identifier: "ja_JP")
        let cases: [(Locale, String, String, AmountReading)] = [
            // German: "," is the decimal point, "." groups thousands.
            (de, "BDT", "12,50", .minor(1250)),
            (de, "BDT", "12.50", .malformed),
            (de, "BDT", "1.250", .minor(125_000)),
            (de, "BDT", "1.250,5", .minor(125_050)),
            (de, "BDT", "0,005", .tooManyDecimals(allowed: 2)),
            (de, "JPY", "1.000", .minor(1000)),
            (de, "JPY", "12,5", .tooManyDecimals(allowed: 0)),
            (de, "KWD", "12,5", .minor(12_500)),
            (de, "KWD", "1,250", .minor(1250)),
            (de, "KWD", "1.000,000", .minor(1_000_000)),
            (de, "KWD", "1.000", .ambiguous(asGrouping: 1_000_000, asDecimal: 1000)),
            // English: "." is the decimal point, "," groups thousands.
            (en, "BDT", "12.50", .minor(1250)),
            (en, "BDT", "12,50", .malformed),
            (en, "BDT", "1,250", .minor(125_000)),
            (en, "BDT", "12.505", .tooManyDecimals(allowed: 2)),
            (en, "BDT", "1,25,000", .malformed),
            (en, "JPY", "1,000", .minor(1000)),
            (en, "JPY", "1.000", .tooManyDecimals(allowed: 0)),
            (en, "KWD", "1.250", .minor(1250)),
            (en, "KWD", "1,000", .ambiguous(asGrouping: 1_000_000, asDecimal: 1000)),
            (en, "KWD", "1,000.5", .minor(1_000_500)),
            (en, "KWD", "1000", .minor(1_000_000)),
            // Japanese: as English; full-width digits are refused rather than guessed.
            (ja, "JPY", "1,250", .minor(1250)),
            (ja, "JPY", "1250", .minor(1250)),
            (ja, "JPY", "12.5", .tooManyDecimals(allowed: 0)),
            (ja, "JPY", "\u{FF11}\u{FF12}", .malformed),
            (ja, "BDT", "12.50", .minor(1250)),
            (ja, "BDT", "12,50", .malformed),
            (ja, "KWD", "1.5", .minor(1500)),
            (ja, "KWD", "1,000", .ambiguous(asGrouping: 1_000_000, asDecimal: 1000)),
            // Separators anywhere else, signs, a second decimal point, 16 integer digits.
            (en, "BDT", "1,2,3", .malformed),
            (en, "BDT", "1.2.3", .malformed),
            (de, "BDT", "+5", .malformed),
            (en, "BDT", "1234567890123456", .malformed),
            (en, "JPY", "0", .zero),
            // French groups with a narrow no-break space; a typed space is accepted in its place.
            (Locale(identifier: "fr_FR"), "BDT", "1 250,50", .minor(125_050)),
        ]
        let wrong = cases.compactMap { locale, currency, text, want -> String? in
            let got = AmountReader.read(text, locale: locale, currency: currency)
            return got == want ? nil : "\(locale.identifier) \(currency) \"\(text)\": got \(got), want \(want)"
        }
        XCTAssertEqual(wrong, [])
    }

    func testEveryAmountRefusalHasItsOwnTextInTheLocale() {
        defer { Texts.locale = Locale(identifier: "en_US") }
        Texts.locale = Locale(identifier: "de_DE")
        XCTAssertEqual(Texts.parseAmount("12,50", currency: "BDT"), .valid(1250))
        XCTAssertEqual(Texts.parseAmount("12.50", currency: "BDT"), .invalid("Geben Sie einen Betrag wie 12,50 ein"))
        XCTAssertEqual(Texts.parseAmount("12,5", currency: "JPY"), .invalid("JPY-Beträge haben keine Nachkommastellen"))
        Texts.locale = Locale(identifier: "ja_JP")
        XCTAssertEqual(Texts.parseAmount("12a", currency: "JPY"), .invalid("Enter an amount like 12"))
        Texts.locale = Locale(identifier: "en_US")
        XCTAssertEqual(Texts.parseAmount("1.000", currency: "JPY"), .invalid("JPY amounts have no decimal places"))
        XCTAssertEqual(Texts.parseAmount("1.0005", currency: "KWD"), .invalid("At most 3 decimal places for KWD"))
        XCTAssertEqual(Texts.parseAmount("12,5", currency: "KWD"), .invalid("Enter an amount like 12.500"))
        XCTAssertEqual(
            Texts.parseAmount("1,000", currency: "KWD"),
            .invalid("\"1,000\" could mean 1,000.000 KWD or 1.000 KWD: type it without the separator, or with all decimals after \".\"")
        )
    }

    /// Before: the struct printed `token: "<the token>"` wherever the account was logged or dumped.
    func testAPrintedDemoAccountNeverShowsItsToken() {
        let a = DemoAccount(serverUrl: "http://localhost:8080", userId: "usr_a", token: "tok-s3cret", recipientId: "usr_b")
        var dumped = ""
        dump(a, to: &dumped)
        for printed in [String(describing: a), String(reflecting: a), "\(a)", dumped, String(describing: [a]), String(describing: Optional(a))] {
            XCTAssertFalse(printed.contains("tok-s3cret"), printed)
            XCTAssertTrue(printed.contains("usr_a"), printed)
        }
        XCTAssertEqual(a.token, "tok-s3cret")
    }

    /// Before: nothing said a transfer's outcome to a screen reader, even one that ended in the background.
    func testATransfersOutcomeIsAnnouncedInTheLocaleNothingWhileOnItsWay() {
        let poor = Rejection(reason: .insufficientFunds, code: "insufficient_funds", detail: "", httpStatus: 402)
        XCTAssertEqual(Texts.announcement(transfer(.succeeded)), "Sent: 12.50 BDT to usr_bob")
        XCTAssertEqual(Texts.announcement(transfer(.rejected, rejection: poor)), "Declined: 12.50 BDT to usr_bob — not enough money")
        XCTAssertEqual(Texts.announcement(transfer(.needsAttention)), "Needs attention: 12.50 BDT to usr_bob")
        for s in [TransferState.pending, .sending, .retrying, .authRequired] {
            XCTAssertNil(Texts.announcement(transfer(s)), "\(s)")
        }
        Texts.locale = Locale(identifier: "de_DE")
        defer { Texts.locale = Locale(identifier: "en_US") }
        XCTAssertEqual(Texts.announcement(transfer(.succeeded)), "Gesendet: 12,50 BDT an usr_bob")
    }

    func testWaitingLineCountsDownInRealSeconds() {
        let retrying = transfer(.retrying, attempts: 3, nextAt: 10_500)
        XCTAssertEqual(Texts.waitingLine(retrying, needsAuth: false, sdkNowMs: 6_000), "Waiting for network — attempt 3, next try in 5s")
        XCTAssertEqual(Texts.waitingLine(retrying, needsAuth: false, sdkNowMs: 11_000), "Waiting for network — attempt 3, next try in 0s")
        XCTAssertEqual(
            Texts.waitingLine(retrying, needsAuth: false, sdkNowMs: 6_000, clockSpeed: 10), "Waiting for network — attempt 3, next try in 1s"
        )
        XCTAssertEqual(
            Texts.waitingLine(transfer(.sending, attempts: 4), needsAuth: false, sdkNowMs: 0), "Waiting for network — attempt 4, trying now"
        )
        XCTAssertEqual(
            Texts.waitingLine(transfer(.authRequired, attempts: 2), needsAuth: true, sdkNowMs: 0),
            "Waiting for sign-in — attempt 2, the server refused the credentials"
        )
    }

    func testEveryStateHasAHumanLabel() {
        let r = Rejection(reason: .insufficientFunds, code: "insufficient_funds", detail: "", httpStatus: 402)
        let label = { (s: TransferState) in Texts.stateLabel(self.transfer(s, attempts: 2, rejection: r)) }
        XCTAssertEqual(label(.pending), "Queued")
        XCTAssertEqual(label(.sending), "Sending (attempt 2)")
        XCTAssertEqual(label(.retrying), "Waiting for network (attempt 2)")
        XCTAssertEqual(label(.authRequired), "Waiting for sign-in")
        XCTAssertEqual(label(.succeeded), "Sent")
        XCTAssertEqual(label(.rejected), "Declined — not enough money")
        XCTAssertEqual(label(.failed), "Failed — not enough money")
        XCTAssertEqual(label(.needsAttention), "Needs attention")
    }

    func testTypedErrorsHaveTheirOwnTexts() {
        XCTAssertEqual(
            Texts.errorText(SendOnceError.InvalidAmount(detail: "too large"), currency: "BDT"),
            "Invalid amount: enter more than 0 and at most 10,000,000,000.00 BDT."
        )
        XCTAssertEqual(
            Texts.errorText(SendOnceError.InvalidRecipient(detail: "x"), currency: "BDT"),
            "Invalid recipient: a user id is 1 to 128 visible characters, without spaces."
        )
        XCTAssertEqual(
            Texts.rejectionText(
                Rejection(reason: .other(code: "weird_code"), code: "weird_code", detail: "odd", httpStatus: 409), transfer(.rejected)),
            "The server said no (409 weird_code). Nothing was sent."
        )
        // The typed reason decides, not the code string.
        XCTAssertEqual(
            Texts.rejectionText(
                Rejection(reason: .insufficientFunds, code: "legacy_nsf", detail: "", httpStatus: 402), transfer(.rejected)),
            "Not enough money: your balance is lower than 12.50 BDT. Nothing was sent."
        )
    }

    func testTheDemosOwnTextsComeFromTheLocalesResourcesMoneyInTheLocale() {
        Texts.locale = Locale(identifier: "de_DE")
        defer { Texts.locale = Locale(identifier: "en_US") }
        XCTAssertEqual(Texts.title(transfer(.succeeded)), "12,50 BDT an usr_bob")
        XCTAssertEqual(Texts.stateLabel(transfer(.succeeded)), "Gesendet")
        XCTAssertEqual(Texts.stateLabel(transfer(.pending)), "In der Warteschlange")
        XCTAssertEqual(Texts.waitingLine(transfer(.retrying, attempts: 2, nextAt: 3_000), needsAuth: false, sdkNowMs: 0), "Warte auf Netz — Versuch 2, nächster in 3 s")
        XCTAssertEqual(Texts.validation(recipient: "usr_bob", amount: "", currency: "BDT"), "Geben Sie einen Betrag ein")
        XCTAssertEqual(TrainMode.offline.description, "Gar kein Netz: Überweisungen warten und werden erneut versucht.")
        // No German text: the English one, never the key.
        XCTAssertEqual(Texts.stateLabel(transfer(.needsAttention)), "Needs attention")
        Texts.locale = Locale(identifier: "en_US")
        XCTAssertEqual(TrainMode.lbReplay.label, "LB replay")
        XCTAssertEqual(Texts.title(transfer(.succeeded)), "12.50 BDT to usr_bob")
    }

    /// Every `demo.*` key the view model's sources name has an English text (a missing one would show the key).
    func testEveryDemoKeyTheViewModelUsesHasAnEnglishText() throws {
        let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../Sources/DemoViewModel").standardizedFileURL
        let files = try FileManager.default.contentsOfDirectory(at: sources, includingPropertiesForKeys: nil)
            .filter { $0.pathExtension == "swift" }
        var used = Set<String>()
        let pattern = try NSRegularExpression(pattern: "\"(demo\\.[a-z_.]+[a-z_])\"")
        for file in files {
            let text = try String(contentsOf: file, encoding: .utf8)
            for m in pattern.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
                used.insert(String(text[Range(m.range(at: 1), in: text)!]))
            }
        }
        XCTAssertGreaterThan(used.count, 30, "\(used)")
        let missing = used.filter { Texts.text($0) == $0 }.sorted()
        XCTAssertEqual(missing, [], "keys without a text")
        for mode in TrainMode.allCases {
            XCTAssertNotEqual(mode.label, "demo.train.\(mode.rawValue)")
            XCTAssertNotEqual(mode.description, "demo.train.\(mode.rawValue).description")
        }
    }

    func testTheTextsOfTheSdksKeysComeFromTheLocalesResources() {
        let poor = Rejection(reason: .insufficientFunds, code: "insufficient_funds", detail: "", httpStatus: 402)
        Texts.locale = Locale(identifier: "de_DE")
        defer { Texts.locale = Locale(identifier: "en_US") }
        XCTAssertEqual(Texts.rejectionText(poor, transfer(.rejected)), "Nicht genug Geld: Ihr Guthaben ist kleiner als 12,50 BDT. Nichts wurde gesendet.")
        XCTAssertEqual(Texts.stateLabel(transfer(.rejected, rejection: poor)), "Abgelehnt — nicht genug Geld")
        // A key without a German text falls back to the English one.
        XCTAssertEqual(Texts.errorText(SendOnceError.TransferUnfinished, currency: "BDT"), "The previous transfer is still on its way.")
        Texts.locale = Locale(identifier: "en_US")
        XCTAssertEqual(Texts.errorText(SendOnceError.Internal(detail: "bug"), currency: "BDT"), "Something went wrong (sendonce.error.internal).")
        let blocked = Rejection(reason: .other(code: "card_blocked"), code: "card_blocked", detail: "", httpStatus: 402)
        XCTAssertEqual(Texts.stateLabel(transfer(.failed, rejection: blocked)), "Failed — card blocked")
    }
}
