package dev.memstrata

import java.nio.file.Path
import kotlin.test.assertEquals
import kotlinx.coroutines.runBlocking
import kotlinx.serialization.Serializable
import kotlinx.serialization.json.JsonPrimitive
import kotlinx.serialization.json.int
import kotlinx.serialization.json.jsonObject
import kotlinx.serialization.json.jsonPrimitive
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.io.TempDir

// The example of docs/bindings.md ("Kotlin"), run as written.

@Serializable
data class Note(val text: String, val step: Int)

suspend fun example(dataDir: String): String {
    val mem = Memory.open("$dataDir/agent.mem", OpenOptions(durability = "immediate"))
    try {
        mem.shortTerm.storeValue("draft", Note("...", 1), ttl = 300.0)
        mem.episodic.record(
            "Deployed v2 to staging",
            RecordOptions(content = encodeJson(mapOf("pr" to 42)), participants = listOf("alice"), tags = listOf("deploy"), importance = 7u),
        )
        val hit = mem.episodic.search("staging deploy", SearchOptions(limit = 10u)).first()
        println("${hit.episode.summary} ${hit.score}")

        mem.semantic.store("user:alice", """{"role": "admin"}""")
        mem.semantic.update("user:alice", """{"team": "infra"}""") // RFC 7386 merge patch

        val s = mem.sessionCreate("refactor", metadata = """{"repo": "x"}""")
        mem.sessionSaveValue(s.sessionId, Note("refactor", 3), compressionLevel = 2u)
        val restored: Note = mem.sessionRestore(s.sessionId).contentAs()

        mem.procedural.learn("triage", """[{"id": "look", "action": "lookup", "parameters": {"user": "{{ params.user }}"}}]""")
        val run = mem.procedural.execute(
            "triage",
            params = """{"user": "bob"}""",
            handler = actionHandler("lookup" to { _ -> JsonPrimitive(5) }),
        )
        return "${restored.step} ${run.status} ${run.outputsJson.jsonObject["look"]!!.jsonPrimitive.int}"
    } finally {
        mem.shutdown() // flushes; `close()` (AutoCloseable) only frees the native object
    }
}

class ExampleTest {
    @Test
    fun `the documented example runs`(@TempDir dir: Path) = runBlocking<Unit> {
        assertEquals("3 completed 5", example(dir.toString()))
    }
}
