package io.sendonce

import org.junit.jupiter.api.AfterAll
import org.junit.jupiter.api.BeforeAll
import org.junit.jupiter.api.TestInstance

/** A test class with one real server-mock for all its tests: started before the first, killed after the last. */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
abstract class ServerTest {
    protected lateinit var server: MockServer

    @BeforeAll
    fun startServer() {
        server = MockServer()
    }

    @AfterAll
    fun stopServer() {
        server.close()
    }
}
