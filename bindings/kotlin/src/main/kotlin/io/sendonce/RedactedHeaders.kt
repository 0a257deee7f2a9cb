package io.sendonce

/**
 * The headers of an [HttpRequest]: a `List<HttpHeader>` to iterate and send as it is, whose [toString] (and so
 * the generated `HttpRequest.toString()`) shows the value of `authorization` as `<redacted>`, so a transport or
 * an interceptor that logs the request it was handed never leaks the bearer token. (A single [HttpHeader]
 * printed on its own still shows its value: log the request, not the header.)
 */
class RedactedHeaders(val headers: List<HttpHeader>) : List<HttpHeader> by headers {
    override fun equals(other: Any?): Boolean = other is List<*> && headers == other

    override fun hashCode(): Int = headers.hashCode()

    override fun toString(): String = headers.joinToString(prefix = "[", postfix = "]") {
        val value = if (it.name.equals("authorization", ignoreCase = true)) "<redacted>" else it.value
        "HttpHeader(name=${it.name}, value=$value)"
    }
}
