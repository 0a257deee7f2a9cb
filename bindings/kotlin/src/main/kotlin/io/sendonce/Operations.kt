// The Kotlin idiom for operations of the app's own API and the contract that reads its server: a
// builder DSL over the generated records (`OperationRequest`, `ResponseContract`).
package io.sendonce

import io.sendonce.core.*

/** Builds an [OperationRequest]: `operation("payout", OperationMethod.POST, "/v2/payouts") { header(...); json(...) }`. */
fun operation(type: String, method: OperationMethod, path: String, build: OperationBuilder.() -> Unit): OperationRequest =
    OperationBuilder(type, method, path).apply(build).build()

/** The DSL of [operation]; the body is committed at confirm and sent byte for byte by every attempt. */
class OperationBuilder internal constructor(
    private val type: String,
    private val method: OperationMethod,
    private val path: String,
) {
    private val headers = mutableListOf<HttpHeader>()
    private var body = ByteArray(0)
    private var contentType = "application/json"

    /** Who receives it, shown in history and on the composer. */
    var counterparty: String = ""
    /** Amount in minor units, shown (0 when none). */
    var amountMinor: Long = 0
    /** ISO 4217 code, shown. */
    var currency: String = ""
    /** Free text, shown. */
    var note: String? = null

    /** A static header, committed and sent with every attempt. */
    fun header(name: String, value: String) { headers += HttpHeader(name = name.lowercase(), value = value) }

    /** The exact body bytes. */
    fun body(bytes: ByteArray, contentType: String = "application/json") {
        body = bytes.copyOf()
        this.contentType = contentType
    }

    /** A JSON body (the app's codec already ran: these are the bytes). */
    fun json(text: String) = body(text.toByteArray(Charsets.UTF_8), "application/json")

    internal fun build() = OperationRequest(
        operationType = type, method = method, path = path, headers = headers.toList(), contentType = contentType,
        body = body, counterparty = counterparty, amountMinor = amountMinor, currency = currency, note = note,
    )
}

/** The action a RequiresAction state asks for, or null. */
val ComposerState.requiredAction: RequiredAction?
    get() = (this as? ComposerState.RequiresAction)?.action
