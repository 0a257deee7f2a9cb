// The one place where errors and rejections get the keys an app localises: the generated sealed
// `SendOnceException` keeps every field of the Rust error (`detail` is an English diagnostic for logs,
// never a text to show), and `RejectionReason` is the typed "why not" of a Rejected or Failed transfer.
package io.sendonce

import io.sendonce.core.*

/**
 * The key an app looks its localised text up by, e.g. `sendonce.error.invalid_amount` (an Android app
 * maps it to a string resource). Exhaustive over the sealed hierarchy: a new case fails to compile here.
 */
val SendOnceException.messageKey: String
    get() = "sendonce.error." + when (this) {
        is SendOnceException.InvalidAmount -> "invalid_amount"
        is SendOnceException.InvalidCurrency -> "invalid_currency"
        is SendOnceException.InvalidRecipient -> "invalid_recipient"
        is SendOnceException.InvalidNote -> "invalid_note"
        is SendOnceException.InvalidConfig -> "invalid_config"
        is SendOnceException.InvalidOperation -> "invalid_operation"
        is SendOnceException.StorageCorrupt -> "storage_corrupt"
        is SendOnceException.StorageFromNewerVersion -> "storage_from_newer_version"
        is SendOnceException.StorageKey -> "storage_key"
        is SendOnceException.StorageFull -> "storage_full"
        is SendOnceException.StorageUnavailable -> "storage_unavailable"
        is SendOnceException.AlreadyOpen -> "already_open"
        is SendOnceException.Busy -> "busy"
        is SendOnceException.AccountMismatch -> "account_mismatch"
        is SendOnceException.UnfinishedTransfers -> "unfinished_transfers"
        is SendOnceException.NotFound -> "not_found"
        is SendOnceException.TransferUnfinished -> "transfer_unfinished"
        is SendOnceException.Closed -> "closed"
        is SendOnceException.LookupFailed -> "lookup_failed"
        is SendOnceException.Cancelled -> "cancelled"
        is SendOnceException.Internal -> "internal"
    }

/** The key of a rejection reason, e.g. `sendonce.rejection.insufficient_funds` (decided in Rust). */
val RejectionReason.messageKey: String get() = rejectionReasonMessageKey(this)

