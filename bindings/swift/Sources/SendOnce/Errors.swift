// The one place where errors and rejections get the keys an app localises: the generated enum
// `SendOnceError` keeps every field of the Rust error as associated values (`detail` is an English
// diagnostic for logs, never a text to show), and `RejectionReason` is the typed "why not" of a Rejected
// or Failed transfer, the same enum as Kotlin's.
import Foundation
import SendOnceFFI

extension SendOnceError: LocalizedError {
    /// The key an app looks its localised text up by, e.g. `sendonce.error.invalid_amount`. Exhaustive: a
    /// new case fails to compile here.
    public var messageKey: String {
        let name = switch self {
        case .InvalidAmount: "invalid_amount"
        case .InvalidCurrency: "invalid_currency"
        case .InvalidRecipient: "invalid_recipient"
        case .InvalidNote: "invalid_note"
        case .InvalidConfig: "invalid_config"
        case .InvalidOperation: "invalid_operation"
        case .StorageCorrupt: "storage_corrupt"
        case .StorageFromNewerVersion: "storage_from_newer_version"
        case .StorageKey: "storage_key"
        case .StorageFull: "storage_full"
        case .StorageUnavailable: "storage_unavailable"
        case .AlreadyOpen: "already_open"
        case .Busy: "busy"
        case .AccountMismatch: "account_mismatch"
        case .UnfinishedTransfers: "unfinished_transfers"
        case .NotFound: "not_found"
        case .TransferUnfinished: "transfer_unfinished"
        case .Closed: "closed"
        case .LookupFailed: "lookup_failed"
        case .Cancelled: "cancelled"
        case .Internal: "internal"
        }
        return "sendonce.error.\(name)"
    }

    /// The app's translation of `messageKey` from its `SendOnce.strings` table (the key itself if it has none).
    public var errorDescription: String? {
        Bundle.main.localizedString(forKey: messageKey, value: messageKey, table: "SendOnce")
    }
}

public extension RejectionReason {
    /// The key of this reason, e.g. `sendonce.rejection.insufficient_funds` (decided in Rust).
    var messageKey: String { rejectionReasonMessageKey(reason: self) }

    /// The app's translation of `messageKey` from its `SendOnce.strings` table (the key itself if it has none).
    var localizedDescription: String {
        Bundle.main.localizedString(forKey: messageKey, value: messageKey, table: "SendOnce")
    }
}
