package dev.memstrata

import java.time.Instant
import kotlin.test.assertContentEquals
import kotlin.test.assertEquals
import kotlin.test.assertFalse
import kotlin.test.assertNotNull
import kotlin.test.assertNull
import kotlin.test.assertTrue
import kotlinx.coroutines.runBlocking
import kotlinx.serialization.Serializable
import kotlinx.serialization.json.JsonPrimitive
import kotlinx.serialization.json.buildJsonObject
import kotlinx.serialization.json.jsonObject
import kotlinx.serialization.json.put
import org.junit.jupiter.api.AfterEach
import org.junit.jupiter.api.Test

@Serializable
data class Draft(val text: String, val revision: Int, val tags: List<String> = emptyList())

class LayersTest {
    private val start = Instant.parse("2031-06-01T10:00:00Z")
    private val clock = ManualClock(start)
    private val mem = Memory(clock = clock)

    @AfterEach
    fun close() = runBlocking<Unit> { mem.shutdown() }

    @Test
    fun `short-term stores JSON with a TTL that the clock expires`() = runBlocking<Unit> {
        val entry = mem.shortTerm.store("draft", """{"text":"hi","n":1}""", ttl = 300.0)
        assertEquals("draft", entry.key)
        assertEquals("""{"n":1,"text":"hi"}""", entry.value)
        assertEquals(start, entry.storedAt)
        assertEquals(start.plusSeconds(300), entry.expiresAt)
        assertEquals("""{"n":1,"text":"hi"}""", mem.shortTerm.retrieve("draft"))
        mem.shortTerm.store("other", "42")
        assertEquals(listOf("draft", "other"), mem.shortTerm.keys())
        assertEquals(listOf("draft"), mem.shortTerm.keys(prefix = "dr"))

        clock.advance(301.0)
        assertNull(mem.shortTerm.retrieve("draft"))
        assertNull(mem.shortTerm.entry("draft"))
        assertEquals("42", mem.shortTerm.retrieve("other"))
        assertTrue(mem.shortTerm.forget("other"))
        assertFalse(mem.shortTerm.forget("other"))
        assertNull(mem.shortTerm.retrieve("missing"))
    }

    @Test
    fun `typed helpers round-trip serializable values`() = runBlocking<Unit> {
        val draft = Draft("plan", 3, listOf("a", "b"))
        mem.shortTerm.storeValue("d", draft)
        assertEquals(draft, mem.shortTerm.retrieveValue<Draft>("d"))
        assertEquals(draft, mem.shortTerm.entry("d")!!.valueAs<Draft>())
        mem.shortTerm.storeValue("list", listOf(1, 2, 3))
        assertEquals(listOf(1, 2, 3), mem.shortTerm.retrieveValue<List<Int>>("list"))
        mem.shortTerm.storeValue("el", buildJsonObject { put("x", 1) })
        assertEquals(JsonPrimitive(1), mem.shortTerm.retrieve("el")!!.toJsonElement().jsonObject["x"])
        assertNull(mem.shortTerm.retrieveValue<Draft>("missing"))
    }

    @Test
    fun `working memory keeps focus and workspace`() = runBlocking<Unit> {
        val w = mem.working
        assertTrue(w.focus("a"))
        assertTrue(w.focus("b"))
        assertEquals(listOf("a", "b"), w.currentFocus())
        val id = w.addToWorkspace("""{"k":1}""")
        w.addValue(Draft("x", 1))
        assertEquals(listOf("""{"k":1}""", """{"revision":1,"tags":[],"text":"x"}"""), w.workspace())
        val items = w.workspaceItems()
        assertEquals(id, items[0].id)
        assertEquals(start, items[0].addedAt)
        assertEquals(Draft("x", 1), decodeJson<Draft>(w.workspace()[1]))
        w.clear()
        assertTrue(w.currentFocus().isEmpty())
        assertTrue(w.workspace().isEmpty())
    }

    @Test
    fun `episodic records, searches with filters, summarizes and forgets`() = runBlocking<Unit> {
        val e = mem.episodic
        val id = e.record(
            "Deployed v2 to staging",
            RecordOptions(content = """{"pr":42}""", participants = listOf("alice"), tags = listOf("deploy"), importance = 7u),
        )
        e.record("Lunch with bob", RecordOptions(participants = listOf("bob"), importance = 2u))
        val hits = e.search("staging deploy")
        assertEquals(1, hits.size)
        val ep = hits[0].episode
        assertEquals(id, ep.id)
        assertEquals("Deployed v2 to staging", ep.summary)
        assertEquals(listOf("alice"), ep.participants)
        assertEquals(listOf("deploy"), ep.tags)
        assertEquals(7u, ep.importance)
        assertEquals(start, ep.timestamp)
        assertEquals(mapOf("pr" to 42), ep.contentAs<Map<String, Int>>())
        assertTrue(hits[0].score > 0.0)

        assertEquals(listOf(id), e.search("", SearchOptions(minImportance = 5u)).map { it.episode.id })
        assertEquals(1, e.search("", SearchOptions(participants = listOf("bob"))).size)
        assertEquals(1, e.search("", SearchOptions(limit = 1u)).size)
        assertTrue(e.search("", SearchOptions(since = start.plusSeconds(1))).isEmpty())
        assertEquals(2, e.recent().size)
        assertEquals(id, e.get(id)!!.id)
        assertTrue(e.summarize(listOf(id)).contains("Deployed v2 to staging"))
        assertTrue(e.forget(id))
        assertNull(e.get(id))
        assertTrue(e.search("staging").isEmpty())
    }

    @Test
    fun `semantic stores versions, merges patches and queries`() = runBlocking<Unit> {
        val s = mem.semantic
        val k1 = s.store("user:alice", """{"role":"admin"}""")
        assertEquals(1L, k1.version)
        val k2 = s.update("user:alice", """{"team":"infra"}""")
        assertEquals(2L, k2.version)
        assertEquals(mapOf("role" to "admin", "team" to "infra"), k2.knowledgeAs<Map<String, String>>())
        assertEquals("""{"role":"admin","team":"infra"}""", s.retrieve("user:alice"))
        assertEquals(listOf(1L, 2L), s.history("user:alice").map { it.version })
        s.storeValue("doc:plan", Draft("infra migration plan", 1))
        assertEquals(Draft("infra migration plan", 1), s.retrieveValue<Draft>("doc:plan"))
        s.updateValue("doc:plan", mapOf("revision" to 2))
        assertEquals(2, s.retrieveValue<Draft>("doc:plan")!!.revision)
        assertEquals(listOf("doc:plan", "user:alice"), s.keys())
        assertEquals(listOf("user:alice"), s.keys(prefix = "user:"))
        val hits = s.query("migration")
        assertEquals("doc:plan", hits.first().key)
        assertNotNull(s.get("user:alice"))
        assertTrue(s.forget("user:alice"))
        assertNull(s.retrieve("user:alice"))
        assertContentEquals(listOf("doc:plan"), s.keys())
    }
}
