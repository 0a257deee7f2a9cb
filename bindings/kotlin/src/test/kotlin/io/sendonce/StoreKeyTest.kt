package io.sendonce

import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows
import java.io.File
import java.nio.file.Files

/**
 * The store key from Kotlin. This host's library is built without encryption (the SQLCipher build is the
 * mobile packages' choice, `--features encryption`; its test is Rust's `sdk/tests/encryption.rs`): a config
 * with a key is then refused, and the file is never created in clear. The key never prints.
 */
class StoreKeyTest {
    @Test
    fun `a key is refused by a library without encryption, and the file is never created in clear`() = runBlocking {
        assertFalse(storeEncryptionAvailable())
        val db = File(Files.createTempDirectory("storekey").toFile(), "s.db")
        val key = StoreKey(ByteArray(32) { 0x5a })
        val config = SendOnceConfig(baseUrl = "http://127.0.0.1:9", dbPath = db.path, encryptionKey = key)
        assertThrows<SendOnceException.InvalidConfig> { runBlocking { SendOnce.open(config) } }
        assertFalse(db.exists(), "nothing written in clear")
        assertFalse(config.toString().contains("5a5a", ignoreCase = true), config.toString())
        assertTrue(config.toString().contains("encryptionKey"), config.toString())
        assertThrows<SendOnceException.InvalidConfig> { StoreKey(ByteArray(16)) }
    }
}
