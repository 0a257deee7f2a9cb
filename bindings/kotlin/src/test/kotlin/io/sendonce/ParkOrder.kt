package io.sendonce

import io.sendonce.core.*
import kotlinx.coroutines.flow.first
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import okhttp3.OkHttpClient

/**
 * The app's process in [OperationsTest]'s process-death test: confirms a payment order against the bank
 * at `args[0]` on the file `args[1]`, prints `parked <localId>` once the bank asked for step-up
 * authentication, and waits to be SIGKILLed.
 */
object ParkOrder {
    @JvmStatic
    fun main(args: Array<String>) = runBlocking {
        val api = OperationsTest()
        val config = SendOnceConfig(baseUrl = args[0], dbPath = args[1], accessToken = AccessToken("tok"), contract = api.bank)
        val sdk = SendOnce.open(config, null, OkHttpTransport(OkHttpClient()))
        val order = sdk.sendOperation(api.paymentOrder("12.50"))
        withTimeout(20_000) { sdk.transferUpdates(order.localId).first { it?.state == TransferState.REQUIRES_ACTION } }
        println("parked ${order.localId}")
        System.out.flush()
        System.`in`.readBytes()
        Unit
    }
}
