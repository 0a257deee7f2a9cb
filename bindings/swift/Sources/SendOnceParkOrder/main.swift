// The app's process in OperationsTests' process-death test: confirms a payment order on the file in its
// first argument against a bank that asks for step-up authentication, prints
// "parked <localId> <key> <base64 body>" once the order is parked, and waits to be SIGKILLed.
// Not part of what an app depends on (no product).
import Foundation
import SendOnce

/// The bank, as far as this process gets: every order answered "SCA required".
final class AlwaysSca: HttpTransport, @unchecked Sendable {
    func send(request: HttpRequest) async throws -> HttpResponse {
        let body = #"{"error":{"code":"SCA_REQUIRED","sca":{"redirect_url":"https://bank.example/sca/ch_1","challenge_id":"ch_1"}}}"#
        return HttpResponse(
            status: 428, headers: [HttpHeader(name: "content-type", value: "application/vnd.bank.error+json")], body: Data(body.utf8))
    }
}

let contract = ResponseContract(
    keyHeader: "x-request-key", keyEcho: .header(name: "x-request-key"), operationId: .header(name: "x-operation-id"),
    problem: ProblemFormat(contentType: "application/vnd.bank.error+json", code: "/error/code", detail: "/error/message"),
    refusals: [], actionRequired: ActionRule(codes: ["SCA_REQUIRED"], url: .body(pointer: "/error/sca/redirect_url"),
    challengeId: .body(pointer: "/error/sca/challenge_id")),
    lookup: LookupRoute(path: "/api/v2/payment-orders/by-key/{key}", notFoundCodes: ["ORDER_NOT_FOUND"]))
let config = SendOnceConfig(
    baseUrl: "https://bank.example", dbPath: CommandLine.arguments[1], accessToken: AccessToken(value: "tok"), contract: contract)
let sdk = try await SendOnce.open(config, tokenProvider: nil, transport: AlwaysSca())
let order = try OperationRequest(
    "payment_order", .post, "/api/v2/payment-orders", json: ["source_account": "DE02-ACC-1", "amount": "12.50"],
    counterparty: "DE89370400440532013000", amountMinor: 1250, currency: "EUR")
let sent = try await sdk.sendOperation(order)
while try await sdk.transfer(sent.localId).state != .requiresAction {
    try await Task.sleep(nanoseconds: 20_000_000)
}
let line = "parked \(sent.localId) \(sent.idempotencyKey) \(order.body.base64EncodedString())\n"
FileHandle.standardOutput.write(Data(line.utf8)) // unbuffered, unlike print
_ = FileHandle.standardInput.readDataToEndOfFile()
