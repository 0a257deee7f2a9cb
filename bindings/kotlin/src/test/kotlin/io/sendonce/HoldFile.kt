package io.sendonce

import kotlinx.coroutines.runBlocking

/** A second process on one database file, as an app's `:worker` process would be: holds it until stdin closes. */
object HoldFile {
    @JvmStatic
    fun main(args: Array<String>) {
        val sdk = runBlocking { SendOnce.shared(SendOnceConfig(baseUrl = "http://127.0.0.1:9", dbPath = args[0])) }
        sdk.use {
            println("holding")
            System.out.flush()
            System.`in`.readBytes()
        }
    }
}
