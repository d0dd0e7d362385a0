package dev.memstrata

import java.nio.file.Files
import java.time.Instant
import kotlin.test.assertEquals
import kotlin.test.assertFailsWith
import kotlin.test.assertTrue
import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.AfterEach
import org.junit.jupiter.api.Test

/** Batch writes (recordMany, storeMany) and the memory budgets from Kotlin. */
class BatchTest {
    private val mem = Memory()

    @AfterEach
    fun close() = runBlocking<Unit> { mem.shutdown() }

    @Test
    fun `recordMany returns ids in order with each item's options`() = runBlocking<Unit> {
        val whenAt = Instant.parse("2025-03-04T05:06:07Z")
        val items = (0 until 30).map { EpisodeItem(summary = "chat turn $it about kayaks", tags = listOf("chat")) }
            .toMutableList()
        items[7] = EpisodeItem(
            summary = "the special one", content = """{"pr":42}""", participants = listOf("alice"),
            tags = listOf("chat"), importance = 9u, timestamp = whenAt,
        )
        val ids = mem.episodic.recordMany(items)
        assertEquals(30, ids.size)
        val ep = mem.episodic.get(ids[7])!!
        assertEquals(listOf("the special one", """{"pr":42}""", "alice", "9", whenAt.toString()),
            listOf(ep.summary, ep.content, ep.participants[0], ep.importance.toString(), ep.timestamp.toString()))
        assertEquals("chat turn 3 about kayaks", mem.episodic.get(ids[3])!!.summary)
        assertEquals(30, mem.episodic.search("", SearchOptions(tags = listOf("chat"), limit = 100u)).size)
        assertEquals(ids[7], mem.episodic.search("special")[0].episode.id)
    }

    @Test
    fun `a bad item rejects the whole batch and names its index and field`() = runBlocking<Unit> {
        mem.episodic.record("kept")
        val items = (0 until 6).map { EpisodeItem(summary = "poisoned $it") }.toMutableList()
        items[3] = EpisodeItem(summary = "bad", importance = 11u)
        val e = assertFailsWith<MemstrataException.InvalidInput> { mem.episodic.recordMany(items) }
        assertTrue(e.message!!.contains("items[3].importance"), e.message)
        items[3] = EpisodeItem(summary = "bad", tags = (1..65).map { "t$it" })
        val l = assertFailsWith<MemstrataException.LimitExceeded> { mem.episodic.recordMany(items) }
        assertTrue(l.message!!.contains("items[3].tags"), l.message)
        assertEquals(listOf("kept"), mem.episodic.recent().map { it.summary })
        assertTrue(mem.episodic.search("poisoned").isEmpty())

        val k = assertFailsWith<MemstrataException.InvalidInput> {
            mem.semantic.storeMany(listOf(KnowledgeItem("a", "1"), KnowledgeItem("", "2")))
        }
        assertTrue(k.message!!.contains("items[1].key"), k.message)
        assertTrue(mem.semantic.keys().isEmpty())
    }

    @Test
    fun `storeMany applies items in order`() = runBlocking<Unit> {
        val got = mem.semantic.storeMany(listOf(
            KnowledgeItem("user:ann", """{"role":"dev"}"""),
            KnowledgeItem("user:bob", """{"city":"Lyon"}""", embedding = listOf(1.0, 0.5)),
            KnowledgeItem("user:ann", """{"role":"lead"}"""),
        ))
        assertEquals(listOf("user:ann" to 1L, "user:bob" to 1L, "user:ann" to 2L), got.map { it.key to it.version })
        assertEquals("""{"role":"lead"}""", mem.semantic.retrieve("user:ann"))
        assertEquals("user:bob", mem.semantic.query("Lyon")[0].key)
    }

    @Test
    fun `memory budgets open with the low-memory preset and are validated`() = runBlocking<Unit> {
        val dir = Files.createTempDirectory("memstrata-kt-budgets")
        val m = Memory(dir.resolve("a").toString(), OpenOptions(lowMemory = true, episodeCacheBytes = 0))
        m.episodic.recordMany(listOf(EpisodeItem(summary = "small footprint")))
        assertEquals(1, m.episodic.search("footprint").size)
        m.shutdown()
        val e = assertFailsWith<MemstrataException.InvalidInput> {
            Memory(dir.resolve("b").toString(), OpenOptions(shortTermCacheBytes = 2L shl 30))
        }
        assertTrue(e.message!!.contains("short_term_cache_bytes"), e.message)
        val d = Memory(
            dir.resolve("d").toString(),
            OpenOptions(lowMemory = true, indexCacheBytes = 1L shl 20, releaseMemoryInterval = 0.0),
        )
        d.episodic.recordMany(listOf(EpisodeItem(summary = "no heap release")))
        assertEquals(1, d.episodic.search("heap").size)
        d.shutdown()
        val f = assertFailsWith<MemstrataException.InvalidInput> {
            Memory(dir.resolve("f").toString(), OpenOptions(indexCacheBytes = 2L shl 30))
        }
        assertTrue(f.message!!.contains("index_cache_bytes"), f.message)
        dir.toFile().deleteRecursively()
    }
}
