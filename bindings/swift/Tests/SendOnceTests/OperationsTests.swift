import Foundation
import XCTest
@testable import SendOnce

// --- README: the bank's own request, Swift --------------------------------------------------------
struct PaymentOrder: Encodable {
    let sourceAccount: String
    let amount: String
    let metadata: [String: String]
}

let bankContract = ResponseContract(
    keyHeader: "x-request-key",
    keyEcho: .header(name: "x-request-key"),  // a success must name the key: a portal's 200 cannot
    operationId: .header(name: "x-operation-id"),
    problem: ProblemFormat(contentType: "application/vnd.bank.error+json", code: "/error/code", detail: "/error/message"),
    refusals: [RefusalCode(code: "FUNDS_INSUFFICIENT", reason: .insufficientFunds)],
    actionRequired: ActionRule(
        codes: ["SCA_REQUIRED"],
        url: .body(pointer: "/error/sca/redirect_url"),
        challengeId: .body(pointer: "/error/sca/challenge_id")),
    lookup: LookupRoute(path: "/api/v2/payment-orders/by-key/{key}", notFoundCodes: ["ORDER_NOT_FOUND"])
)

func paymentOrder(_ amount: String) throws -> OperationRequest {
    try OperationRequest(
        "payment_order", .post, "/api/v2/payment-orders",
        json: PaymentOrder(sourceAccount: "DE02-ACC-1", amount: amount, metadata: ["basket": "b-7"]),
        headers: ["x-channel": "mobile"], counterparty: "DE89370400440532013000", amountMinor: 1250, currency: "EUR")
}

// Committed with its key before the first byte leaves; parked while the customer completes the
// bank's step (3-D Secure, SCA), then sent again with the same key and the same bytes.
func payOrder(
    _ sdk: SendOnce, amount: String, completeStep: (RequiredAction) async throws -> Void
) async throws -> Transfer {
    let sent = try await sdk.sendOperation(try paymentOrder(amount))
    var outcome = try await sdk.outcome(of: sent.localId)
    while outcome.state == .requiresAction, let step = outcome.requiredAction {
        try await completeStep(step)  // open step.url, wait for the customer
        _ = try await sdk.actionCompleted(sent.localId)
        outcome = try await sdk.outcome(of: sent.localId)
    }
    return outcome  // .succeeded with the bank's order id, or .rejected with a typed reason
}
// --- end README -----------------------------------------------------------------------------------

/// A bank's own API through the SDK (its operation, its contract, its step-up authentication), answered
/// by a scripted bank inside the app's transport: no server-mock involved.
final class OperationsTests: XCTestCase {
    /// The README's contract with one part changed (the records are immutable values).
    static func contract(
        keyEcho: AnswerLocator? = bankContract.keyEcho, errors: String = bankContract.problem.contentType
    ) -> ResponseContract {
        let c = bankContract
        return ResponseContract(
            keyHeader: c.keyHeader, keyEcho: keyEcho, operationId: c.operationId, replayedHeader: c.replayedHeader,
            problem: ProblemFormat(contentType: errors, code: c.problem.code, detail: c.problem.detail),
            refusals: c.refusals, otherCodesRefuse: c.otherCodesRefuse, keyInUse: c.keyInUse, keyReused: c.keyReused,
            auth: c.auth, actionRequired: c.actionRequired, lookup: c.lookup)
    }

    /// The bank, scripted: the first order answers "SCA required" (unless `scaFirst` is false), every later
    /// one succeeds for its key.
    final class Bank: HttpTransport, @unchecked Sendable {
        private let lock = NSLock()
        private var posts: [HttpRequest] = []
        private let scaFirst: Bool
        init(scaFirst: Bool = true) { self.scaFirst = scaFirst }
        var received: [HttpRequest] { lock.lock(); defer { lock.unlock() }; return posts }

        func send(request: HttpRequest) async throws -> HttpResponse {
            let error = HttpHeader(name: "content-type", value: "application/vnd.bank.error+json")
            if request.method == "GET" {
                return HttpResponse(status: 404, headers: [error], body: Data(#"{"error":{"code":"ORDER_NOT_FOUND"}}"#.utf8))
            }
            let n: Int = { lock.lock(); defer { lock.unlock() }; posts.append(request); return posts.count }()
            let key = request.headers.first { $0.name == "x-request-key" }?.value ?? ""
            if n == 1 && scaFirst {
                let body = #"{"error":{"code":"SCA_REQUIRED","sca":{"redirect_url":"https://bank.example/sca/ch_1","challenge_id":"ch_1"}}}"#
                return HttpResponse(status: 428, headers: [error], body: Data(body.utf8))
            }
            return HttpResponse(
                status: 201,
                headers: [HttpHeader(name: "content-type", value: "application/json"),
                          HttpHeader(name: "x-request-key", value: key), HttpHeader(name: "x-operation-id", value: "po_1")],
                body: Data(#"{"status":"EXECUTED"}"#.utf8))
        }
    }

    func config(_ db: String) -> SendOnceConfig {
        SendOnceConfig(baseUrl: "https://bank.example", dbPath: db, accessToken: AccessToken(value: "tok"), contract: bankContract)
    }

    func testAStepUpAnswerParksTheOrderSurvivesAReopenAndResumesWithTheSameKeyAndBytes() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent(UUID().uuidString)
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let db = dir.appendingPathComponent("d.db").path
        let bank = Bank()
        let sdk = try await SendOnce.open(config(db), tokenProvider: nil, transport: bank)
        let composer = try await sdk.composer()
        let first = try await composer.confirm(try paymentOrder("12.50"))
        XCTAssertEqual(first.operationType, "payment_order")
        var parked: ComposerState?
        for await state in composer.states() {
            if state.requiredAction != nil { parked = state; break }
        }
        XCTAssertEqual(parked?.requiredAction?.challengeId, "ch_1")
        XCTAssertEqual(parked?.requiredAction?.url, "https://bank.example/sca/ch_1")
        XCTAssertFalse(composer.sendEnabled)
        let again = try await composer.confirm(try paymentOrder("12.50"))
        XCTAssertEqual(again.localId, first.localId, "a second tap while parked: the same order")
        composer.close()
        sdk.close()

        let reopened = try await SendOnce.open(config(db), tokenProvider: nil, transport: bank)
        let still = try await reopened.transfer(first.localId)
        XCTAssertEqual(still.state, .requiresAction)
        XCTAssertEqual(bank.received.count, 1)
        _ = try await reopened.actionCompleted(first.localId)
        let done = try await reopened.outcome(of: first.localId)
        XCTAssertEqual(done.state, .succeeded)
        XCTAssertEqual(done.serverTransferId, "po_1")
        reopened.close()
        let posts = bank.received
        XCTAssertEqual(posts.count, 2)
        XCTAssertEqual(posts[0].body, posts[1].body)
        XCTAssertEqual(posts[0].headers.first { $0.name == "x-request-key" }, posts[1].headers.first { $0.name == "x-request-key" })
        XCTAssertEqual(posts[1].url, "https://bank.example/api/v2/payment-orders")
    }

    func testTheReadmesOrderIsPaidOnceThroughTheCustomersStepUnderOneKey() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent(UUID().uuidString)
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let bank = Bank()
        let sdk = try await SendOnce.open(config(dir.appendingPathComponent("d.db").path), tokenProvider: nil, transport: bank)
        defer { sdk.close() }
        let steps = Locked<[String?]>([])
        let done = try await payOrder(sdk, amount: "12.50") { step in steps.withLock { $0.append(step.challengeId) } }
        XCTAssertEqual(done.state, .succeeded)
        XCTAssertEqual(done.serverTransferId, "po_1")
        XCTAssertEqual(steps.withLock { $0 }, ["ch_1"])
        let posts = bank.received
        XCTAssertEqual(posts.count, 2)
        XCTAssertEqual(posts[0].body, posts[1].body)
        XCTAssertEqual(posts[0].headers.first { $0.name == "x-request-key" }, posts[1].headers.first { $0.name == "x-request-key" })
    }

    func testAnOrderParkedWhenItsProcessIsSigkilledStaysParkedAndResumesWithItsKeyAndBytes() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent(UUID().uuidString)
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let db = dir.appendingPathComponent("d.db").path
        let child = Process()
        child.executableURL = try helperExecutable("SendOnceParkOrder", near: Self.self)
        child.arguments = [db]
        let stdin = Pipe(), stdout = Pipe()
        child.standardInput = stdin
        child.standardOutput = stdout
        try child.run()
        let line = firstLine(of: stdout)
        // SIGKILL: no close, no flush, as when iOS kills a suspended app.
        kill(child.processIdentifier, SIGKILL)
        child.waitUntilExit()
        XCTAssertEqual(child.terminationReason, .uncaughtSignal)
        XCTAssertEqual(child.terminationStatus, SIGKILL)
        let words = line.split(separator: " ").map(String.init)
        XCTAssertEqual(words.count, 4, "parked <localId> <key> <body>: \(words)")
        guard words.count == 4, words[0] == "parked", let body = Data(base64Encoded: words[3].trimmingCharacters(in: .whitespacesAndNewlines)) else {
            return XCTFail("the child never parked its order")
        }
        let (localId, key) = (words[1], words[2])

        let bank = Bank(scaFirst: false)
        let sdk = try await SendOnce.open(config(db), tokenProvider: nil, transport: bank)
        defer { sdk.close() }
        let still = try await sdk.transfer(localId)
        XCTAssertEqual(still.state, .requiresAction)
        // Parked is parked: no attempt however long it waits (the sender would retry within a second).
        try await Task.sleep(nanoseconds: 1_500_000_000)
        XCTAssertEqual(bank.received.count, 0, "no attempt while parked")
        _ = try await sdk.actionCompleted(localId)
        let done = try await sdk.outcome(of: localId)
        XCTAssertEqual(done.state, .succeeded)
        let posts = bank.received
        XCTAssertEqual(posts.count, 1)
        XCTAssertEqual(posts.first?.headers.first { $0.name == "x-request-key" }?.value, key, "the key minted before the kill")
        XCTAssertEqual(posts.first?.body, body, "the bytes committed before the kill")
    }

    func testAContractThatCannotTellTheBankFromAProxyIsRefused() async throws {
        let blind = Self.contract(keyEcho: nil)
        XCTAssertThrowsError(try validateContract(contract: blind)) { error in
            guard case SendOnceError.InvalidConfig = error else { return XCTFail("\(error)") }
        }
        let html = Self.contract(errors: "text/html")
        XCTAssertThrowsError(try validateContract(contract: html))
        XCTAssertNoThrow(try validateContract(contract: bankContract))
    }
}
