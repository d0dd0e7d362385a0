package dev.memstrata

import java.nio.file.Path
import kotlin.test.assertEquals
import kotlin.test.assertFailsWith
import kotlin.test.assertTrue
import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.io.TempDir

/** Encryption at rest with a key the host passes as bytes (e.g. from the keychain). */
class EncryptionTest {
    @Test
    fun `an encrypted store opens with its key only and stays intact`(@TempDir dir: Path) = runBlocking<Unit> {
        val path = dir.resolve("enc.mem").toString()
        val key = ByteArray(32) { it.toByte() }
        val mem = Memory.open(path, OpenOptions(durability = "immediate", encryptionKey = key))
        mem.shortTerm.store("secret", """{"text":"sealed"}""")
        mem.shutdown()

        val wrong = assertFailsWith<MemstrataException.InvalidInput> {
            Memory.open(path, OpenOptions(encryptionKey = ByteArray(32)))
        }
        assertTrue(wrong.message!!.contains("`encryption_key`"), wrong.message)
        assertTrue(wrong.message!!.contains("wrong encryption key"), wrong.message)
        val missing = assertFailsWith<MemstrataException.InvalidInput> { Memory.open(path) }
        assertTrue(missing.message!!.contains("is encrypted"), missing.message)
        val short = assertFailsWith<MemstrataException.InvalidInput> {
            Memory.open(path, OpenOptions(encryptionKey = ByteArray(16)))
        }
        assertTrue(short.message!!.contains("must be exactly 32 bytes, got 16 bytes"), short.message)

        val again = Memory.open(path, OpenOptions(encryptionKey = key))
        assertEquals("""{"text":"sealed"}""", again.shortTerm.retrieve("secret"))
        again.shutdown()
    }
}
