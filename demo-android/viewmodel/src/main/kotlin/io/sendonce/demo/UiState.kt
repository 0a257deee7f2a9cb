package io.sendonce.demo

import io.sendonce.NetworkProfile

/** What the whole screen shows; the Compose shell lays this out and nothing else. */
data class DemoUiState(
    /** True until the SDK is open (first start, or after the server URL changed). */
    val loading: Boolean = true,
    /** Why the app could not start (server unreachable on first start, bad URL, storage); null when fine. */
    val setupError: String? = null,

    /** "Balance: 10,000.00 BDT", "Balance: …" while loading, or why it is unavailable. */
    val balanceText: String = Texts.text("demo.balance.loading"),
    val balanceMinor: Long? = null,
    /** "You: usr_…" — the demo account on this server. */
    val accountText: String = "",
    /** The demo account's user id on this server (null until signed up). */
    val accountUserId: String? = null,

    /** Which part of the screen is in front. */
    val screen: Screen = Screen.FORM,
    val recipient: String = "",
    val amount: String = "",
    /** Live validation text under the form; null when the form is valid. */
    val validationText: String? = null,
    /** True when the Review button is enabled (the form is valid and the SDK is open). */
    val reviewEnabled: Boolean = false,
    /** "Send 12.50 BDT to usr_…?" on the confirm step. */
    val confirmText: String? = null,
    /** "12.50 BDT to usr_…": the transfer the confirm screen follows (progress, receipt, rejection). */
    val transferTitle: String? = null,
    /** The Send button: exactly the composer's `sendEnabled`. */
    val sendEnabled: Boolean = false,
    /** Why Send is off, for screen readers (the button's state description); null while it is on. */
    val sendHint: String? = null,
    /** A spinner next to the status line. */
    val showSpinner: Boolean = false,
    /** "Sending…", or "Waiting for network — attempt N, next try in Xs" while retrying. */
    val statusLine: String? = null,
    /** The receipt after Done. */
    val receipt: Receipt? = null,
    /** What went wrong with the last Send (typed SDK error or the server's definitive no). */
    val errorText: String? = null,
    /** One-off information, e.g. "Resumed a transfer confirmed before the app was closed." */
    val notice: String? = null,

    /** Recent transfers, newest first, with human state labels. */
    val transfers: List<TransferRow> = emptyList(),

    /** Train mode (the SDK's network simulator). */
    val trainMode: TrainMode = TrainMode.OFF,
    val trainModes: List<TrainMode> = TrainMode.entries,
    /** What the host OS says about connectivity (forwarded to the SDK). */
    val networkAvailable: Boolean = true,

    /** Settings: the server URL being edited, and why it cannot be used. */
    val serverUrl: String = DemoOptions.DEFAULT_SERVER_URL,
    val serverUrlField: String = DemoOptions.DEFAULT_SERVER_URL,
    val settingsError: String? = null,
)

/** The part of the screen in front. */
enum class Screen {
    /** Recipient and amount. */
    FORM,

    /** "Send X to Y?" with the Send button. */
    CONFIRM,

    /** Spinner and status line while the SDK sends or waits to retry. */
    PROGRESS,

    /** The money moved: receipt with the server's transfer id. */
    RECEIPT,

    /** A definitive no from the server (nothing moved); Send is enabled again for a corrected request. */
    REJECTED,

    /** The SDK stopped retrying; the outcome is resolved by a status look-up, never by a new key. */
    NEEDS_ATTENTION,
}

/** The receipt of a succeeded transfer. */
data class Receipt(
    val title: String,
    val serverTransferId: String,
    val idempotencyKey: String,
    val attempts: Int,
    /** "The server replayed its stored answer: the first attempt had already moved the money." or null. */
    val replayNote: String?,
)

/** One line of the recent transfers list. */
data class TransferRow(
    val localId: String,
    /** "12.50 BDT to usr_…" */
    val title: String,
    /** "Sent", "Waiting for network (attempt 3)", "Declined — not enough money", ... */
    val stateLabel: String,
    /** The server transfer id once sent, else null. */
    val serverTransferId: String?,
    val idempotencyKey: String,
    val settled: Boolean,
    /** What a screen reader announces once this transfer has an outcome (Texts.announcement), else null. */
    val announcement: String? = null,
)

/** The Train-mode selector: the SDK's network profiles a demo switches between (texts: `demo.train.<key>`). */
enum class TrainMode(private val key: String, val profile: NetworkProfile) {
    OFF("off", NetworkProfile.Off),
    TRAIN("train", NetworkProfile.Train),
    OFFLINE("offline", NetworkProfile.Offline),
    LB_REPLAY("lb_replay", NetworkProfile.LbReplay),
    ;

    /** The chip's label in the demo's locale. */
    val label: String get() = Texts.text("demo.train.$key")

    /** One line on what the profile does. */
    val description: String get() = Texts.text("demo.train.$key.description")
}
