package io.sendonce

import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test

class SdkVersionTest {
    /** The generated package loads libsendonce_ffi through JNA and calls into Rust. */
    @Test
    fun `sdk version comes from the Rust core`() {
        val version = sdkVersion()
        assertTrue(version.isNotEmpty())
        assertEquals(3, version.split('.').size, "semver, got $version")
    }
}
