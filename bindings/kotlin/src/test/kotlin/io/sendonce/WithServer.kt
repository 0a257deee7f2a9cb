package io.sendonce

import org.junit.jupiter.api.AfterAll
import org.junit.jupiter.api.BeforeAll
import org.junit.jupiter.api.TestInstance

/** One real server-mock on loopback for all the tests of a class. */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
abstract class WithServer {
    lateinit var server: MockServer

    @BeforeAll
    fun startServer() {
        server = MockServer()
    }

    @AfterAll
    fun stopServer() {
        server.close()
    }
}
