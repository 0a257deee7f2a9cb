package io.sendonce

import kotlinx.coroutines.suspendCancellableCoroutine
import okhttp3.Call
import okhttp3.Callback
import okhttp3.OkHttpClient
import okhttp3.Request
import okhttp3.RequestBody.Companion.toRequestBody
import okhttp3.Response
import java.io.IOException
import java.io.InterruptedIOException
import java.net.UnknownHostException
import kotlin.coroutines.resume
import kotlin.coroutines.resumeWithException

/**
 * The SDK's requests through the app's own OkHttp client: its certificate pinner, Network Security
 * Config, interceptors, proxy and event listener apply.
 *
 * ```
 * val sdk = SendOnce.shared(config, transport = OkHttpTransport(appClient))
 * ```
 *
 * The client is copied with retries and redirects off: the SDK's schedule owns every retry (with the same
 * key and bytes), and a followed 3xx would send the body elsewhere. Every failure is "outcome unknown".
 */
class OkHttpTransport(client: OkHttpClient) : HttpTransport {
    private val client = client.newBuilder()
        .retryOnConnectionFailure(false)
        .followRedirects(false)
        .followSslRedirects(false)
        .build()

    override suspend fun send(request: HttpRequest): HttpResponse = suspendCancellableCoroutine { cont ->
        val builder = Request.Builder().url(request.url)
        for (header in request.headers) builder.addHeader(header.name, header.value)
        builder.method(request.method, if (request.method == "GET") null else request.body.toRequestBody(null))
        val call = client.newCall(builder.build())
        cont.invokeOnCancellation { call.cancel() }
        call.enqueue(object : Callback {
            override fun onFailure(call: Call, e: IOException) {
                cont.resumeWithException(failure(e))
            }

            override fun onResponse(call: Call, response: Response) {
                val answer = try {
                    response.use {
                        HttpResponse(
                            status = it.code.toUShort(),
                            headers = it.headers.map { (name, value) -> HttpHeader(name.lowercase(), value) },
                            body = it.body?.bytes() ?: ByteArray(0),
                        )
                    }
                } catch (e: IOException) {
                    cont.resumeWithException(failure(e))
                    return
                }
                cont.resume(answer)
            }
        })
    }

    private fun failure(e: IOException): TransportFailure = when (e) {
        is InterruptedIOException -> TransportFailure.Timeout()
        is UnknownHostException -> TransportFailure.Offline()
        else -> TransportFailure.Connection("${e.javaClass.simpleName}: ${e.message}")
    }
}
