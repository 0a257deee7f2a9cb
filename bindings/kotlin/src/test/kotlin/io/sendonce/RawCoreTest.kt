package io.sendonce

import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test

/** The raw generated core is marked, so an app that names it gets a compile error (RequiresOptIn, ERROR). */
class RawCoreTest {
    @Test
    fun `the generated core classes need an opt-in, the idiomatic layer does not`() {
        for (raw in listOf(SendOnceCore::class, SendOnceCoreInterface::class, ComposerCore::class, ComposerCoreInterface::class, IoProbe::class)) {
            assertTrue(raw.java.isAnnotationPresent(InternalSendOnceApi::class.java), "${raw.simpleName} is not marked")
        }
        for (api in listOf(SendOnce::class, Composer::class, SendOnceClient::class, ComposerClient::class)) {
            assertTrue(!api.java.isAnnotationPresent(InternalSendOnceApi::class.java), "${api.simpleName} is marked")
        }
    }
}
