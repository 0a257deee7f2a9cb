import Foundation

// `dump()` and debuggers read a value through its mirror, not its description: these mirrors show what
// support needs (ids, key, state, amount) and never the recipient, the note, the counterparty or a
// request's body and header values. (`description` and `debugDescription` come from the core's redacting
// Display and Debug, so `print`, `"\(transfer)"` and `String(reflecting:)` agree.)

private let redacted = "<redacted>"

extension Transfer: CustomReflectable {
    public var customMirror: Mirror {
        Mirror(self, children: [
            "localId": localId, "idempotencyKey": idempotencyKey, "operationType": operationType,
            "state": state, "attempts": attempts, "amountMinor": amountMinor, "currency": currency,
            "toUserId": redacted, "note": note == nil ? "nil" : redacted,
            "serverTransferId": serverTransferId as Any, "replayed": replayed,
        ], displayStyle: .struct)
    }
}

extension TransferRequest: CustomReflectable {
    public var customMirror: Mirror {
        Mirror(self, children: [
            "toUserId": redacted, "amountMinor": amountMinor, "currency": currency,
            "note": note == nil ? "nil" : redacted,
        ], displayStyle: .struct)
    }
}

extension OperationRequest: CustomReflectable {
    public var customMirror: Mirror {
        Mirror(self, children: [
            "operationType": operationType, "method": method, "path": path,
            "headers": headers.map { "\($0.name): \(redacted)" }, "contentType": contentType,
            "body": "\(body.count) bytes \(redacted)", "counterparty": redacted,
            "amountMinor": amountMinor, "currency": currency, "note": note == nil ? "nil" : redacted,
        ], displayStyle: .struct)
    }
}
