// The Swift idiom for operations of the app's own API: the generated value types (`OperationRequest`,
// `ResponseContract`) with a JSON-body initialiser, and the action a `.requiresAction` state asks for.
import Foundation
import SendOnceFFI

public extension OperationRequest {
    /// An operation whose body is the app's own `Encodable` value, encoded once here (these bytes are
    /// committed at confirm and sent by every attempt).
    init<Body: Encodable>(
        _ type: String, _ method: OperationMethod, _ path: String, json body: Body,
        headers: [String: String] = [:], counterparty: String = "", amountMinor: Int64 = 0, currency: String = "", note: String? = nil
    ) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        self.init(
            operationType: type, method: method, path: path,
            headers: headers.sorted { $0.key < $1.key }.map { HttpHeader(name: $0.key.lowercased(), value: $0.value) },
            contentType: "application/json", body: try encoder.encode(body),
            counterparty: counterparty, amountMinor: amountMinor, currency: currency, note: note)
    }
}

public extension ComposerState {
    /// The action a `.requiresAction` state asks for, or nil.
    var requiredAction: RequiredAction? {
        if case let .requiresAction(_, action) = self { return action }
        return nil
    }
}
