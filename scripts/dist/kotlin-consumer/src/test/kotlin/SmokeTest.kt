import dev.memstrata.*   // the classes and the Kotlin extensions (shortTerm, episodic, ...)
import java.nio.file.Path
import kotlin.test.assertEquals
import kotlin.test.assertFailsWith
import kotlin.test.assertTrue
import kotlinx.coroutines.runBlocking
import kotlinx.serialization.json.JsonPrimitive
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.io.TempDir

// The memstrata-kotlin JAR as a dependency: the native library is loaded from inside it.
class SmokeTest {
    @Test
    fun `the JAR carries the native library and works`(@TempDir dir: Path) = runBlocking<Unit> {
        // JNA's resource path for this platform: linux-x86-64/libmemstrata_ffi.so on Linux x86-64.
        val path = com.sun.jna.Platform.RESOURCE_PREFIX + "/" + System.mapLibraryName("memstrata_ffi")
        val res = Memory::class.java.classLoader.getResource(path)
        assertTrue(res != null && res.protocol == "jar", "libmemstrata_ffi.so inside the JAR, got $res")
        assertTrue(System.getProperty("jna.library.path").isNullOrEmpty(), "no jna.library.path")

        val mem = Memory.open("$dir/agent.mem", OpenOptions(durability = "immediate"))
        mem.shortTerm.store("draft", """{"text":"..."}""")
        assertEquals("""{"text":"..."}""", mem.shortTerm.retrieve("draft"))
        mem.episodic.record("Deployed v2 to staging", RecordOptions(tags = listOf("deploy"), importance = 7u))
        val hit = mem.episodic.search("staging deploy", SearchOptions(limit = 10u)).first()
        assertEquals("Deployed v2 to staging", hit.episode.summary)
        mem.semantic.store("user:alice", """{"role": "admin"}""")
        mem.semantic.update("user:alice", """{"team": "infra"}""")
        mem.procedural.learn("triage", """[{"id": "look", "action": "lookup", "parameters": {"user": "{{ params.user }}"}}]""")
        val run = mem.procedural.execute("triage", params = """{"user": "bob"}""",
            handler = actionHandler("lookup" to { _ -> JsonPrimitive(5) }))
        assertEquals("completed", run.status)
        mem.shutdown()

        val key = ByteArray(32) { it.toByte() }
        val sealed = Memory.open("$dir/sealed.mem", OpenOptions(durability = "immediate", encryptionKey = key))
        sealed.shortTerm.store("secret", """{"pin":1}""")
        sealed.shutdown()
        val wrong = assertFailsWith<Exception> { Memory.open("$dir/sealed.mem", OpenOptions(encryptionKey = ByteArray(32))) }
        assertTrue(wrong.message!!.contains("wrong encryption key"), wrong.message)
        println("kotlin smoke: ok (native library from $res)")
    }
}
