// Views over the generated value types (Transfer, TransferState, ComposerState, NetworkProfile, ...), which
// live in this same package: the generated code is `io.sendonce` too, so `import io.sendonce.*` brings the
// whole API, including the sealed `SendOnceException` hierarchy (one subclass per case, message = detail).
// Every decision (finality, whether Send is enabled) is made in Rust; these only ask it.
package io.sendonce

import io.sendonce.core.*

/** True once the outcome is known and nothing more will happen. */
val TransferState.isFinal: Boolean get() = transferStateIsFinal(this)

/** True once a UI should stop showing progress (final, or handed to the user). */
val TransferState.isSettled: Boolean get() = transferStateIsSettled(this)

/** Whether the Send button is enabled in this state. */
val ComposerState.sendEnabled: Boolean get() = composerStateSendEnabled(this)

/** The transfer a composer state is about, if any. */
val ComposerState.currentTransfer: Transfer?
    get() = when (this) {
        is ComposerState.Editing -> null
        is ComposerState.Submitting -> transfer
        is ComposerState.Waiting -> transfer
        is ComposerState.Done -> receipt
        is ComposerState.Rejected -> transfer
        is ComposerState.NeedsAttention -> transfer
        is ComposerState.RequiresAction -> transfer
    }
