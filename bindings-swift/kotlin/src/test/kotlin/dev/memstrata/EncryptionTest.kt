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

    @Test
    fun `rekey rotates the key in place and the old key is refused`(@TempDir dir: Path) = runBlocking<Unit> {
        val path = dir.resolve("rotated.mem").toString()
        val old = ByteArray(32) { 1 }
        val new = ByteArray(32) { 2 }
        val mem = Memory.open(path, OpenOptions(durability = "immediate", encryptionKey = old))
        mem.switchContext("proj")
        mem.shortTerm.store("secret", """{"text":"sealed"}""")
        mem.episodic.record("rotated keys keep every episode")

        // Another handle on the store: refused, nothing changed, this one keeps working.
        val ns = mem.namespace("other")
        assertFailsWith<MemstrataException.StoreLocked> { mem.rekey(new) }
        ns.shutdown()
        assertEquals("""{"text":"sealed"}""", mem.shortTerm.retrieve("secret"))
        val short = assertFailsWith<MemstrataException.InvalidInput> { mem.rekey(ByteArray(16)) }
        assertTrue(short.message!!.contains("must be exactly 32 bytes, got 16 bytes"), short.message)

        mem.rekey(new)
        // Still open, in the same context, with the new key.
        assertEquals("proj", mem.activeContext())
        assertEquals("""{"text":"sealed"}""", mem.shortTerm.retrieve("secret"))
        mem.shutdown()

        val refused = assertFailsWith<MemstrataException.InvalidInput> {
            Memory.open(path, OpenOptions(encryptionKey = old))
        }
        assertTrue(refused.message!!.contains("`encryption_key`"), refused.message)
        assertTrue(refused.message!!.contains("wrong encryption key"), refused.message)

        val again = Memory.open(path, OpenOptions(encryptionKey = new))
        again.switchContext("proj")
        assertEquals("""{"text":"sealed"}""", again.shortTerm.retrieve("secret"))
        assertEquals("rotated keys keep every episode", again.episodic.search("rotated").single().episode.summary)
        again.shutdown()
    }
}
