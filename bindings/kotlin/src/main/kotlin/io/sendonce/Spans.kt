// Spans checked before they cross into Rust: uniffi's generated lowering of a java.time.Duration throws
// IllegalArgumentException on a negative one, outside the sealed SendOnceException an app catches. Rust
// refuses the rest (zero timeouts, a retention outside its range); this keeps bad settings one typed error.
package io.sendonce

import java.time.Duration

/** Throws [SendOnceException.InvalidConfig] naming the span unless it is zero or more. */
internal fun checkSpan(name: String, value: Duration?) {
    if (value != null && value.isNegative) {
        throw SendOnceException.InvalidConfig("$name is $value; a span must be zero or more")
    }
}

/** Every span of the config lowerable, or `InvalidConfig` naming the first that is not. */
internal fun SendOnceConfig.checkSpans() {
    checkSpan("requestTimeout", requestTimeout)
    checkSpan("connectTimeout", connectTimeout)
    checkSpan("retention", retention)
    checkSpan("tokenTimeout", tokenTimeout)
    checkSpan("backgroundWakeWindow", backgroundWakeWindow)
    retry?.let {
        checkSpan("retry.base", it.base)
        checkSpan("retry.cap", it.cap)
        checkSpan("retry.giveUpAfter", it.giveUpAfter)
    }
    networkProfile?.checkSpans()
}

/** A custom profile's spans lowerable, or `InvalidConfig` naming the first that is not. */
internal fun NetworkProfile.checkSpans() {
    if (this !is NetworkProfile.Custom) return
    checkSpan("latency", settings.latency)
    checkSpan("latencyJitter", settings.latencyJitter)
    checkSpan("tunnelEvery", settings.tunnelEvery)
    checkSpan("tunnelLength", settings.tunnelLength)
    checkSpan("timeout", settings.timeout)
}
