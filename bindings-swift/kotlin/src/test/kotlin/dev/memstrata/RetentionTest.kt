package dev.memstrata

import java.time.Instant
import kotlin.test.assertEquals
import kotlin.test.assertFailsWith
import kotlin.test.assertNotNull
import kotlin.test.assertNull
import kotlin.test.assertTrue
import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.AfterEach
import org.junit.jupiter.api.Test

/** Forgetting by utility: setRetention with named arguments, retention, evictions, status, rankByUtility. */
class RetentionTest {
    private val mem = Memory()

    @AfterEach
    fun close() = runBlocking<Unit> { mem.shutdown() }

    @Test
    fun `setRetention evicts the lowest utility and audits it`() = runBlocking<Unit> {
        val ids = (1..6).map { mem.episodic.record("observation $it", RecordOptions(importance = it.toUInt())) }
        mem.setRetention(maxEpisodes = 4, maxAge = 30.0 * 86400)
        val p = mem.retention()
        assertEquals(4L, p.maxEpisodes)
        assertNull(p.maxBytes)
        assertEquals(30.0 * 86400, p.maxAge)
        assertNull(mem.episodic.get(ids[0]))
        assertNotNull(mem.episodic.get(ids[5]))

        val ev = mem.evictions()
        assertEquals(ids.take(2).toSet(), ev.map { it.id }.toSet())
        assertTrue(ev.all { it.reason == "max_episodes" && it.context == "default" })
        assertTrue(ev[0].evictedAt <= Instant.now())

        val r = mem.status().retention.single()
        assertEquals("default", r.context)
        assertEquals(2L, r.evicted)
        assertTrue(mem.optimize().optimizationDetails.contains("\"evicted_total\":2"))

        mem.setRetention()
        assertNull(mem.retention().maxEpisodes)
        val bad = assertFailsWith<MemstrataException.InvalidInput> { mem.setRetention(maxEpisodes = 0) }
        assertTrue(bad.message!!.contains("max_episodes"), bad.message)
        assertFailsWith<MemstrataException.InvalidInput> { mem.setRetention(maxAge = -1.0, namespace = "x") }
    }

    @Test
    fun `search with rankByUtility`() = runBlocking<Unit> {
        val old = mem.episodic.record(
            "release checklist",
            RecordOptions(importance = 1u, timestamp = Instant.parse("2001-01-01T00:00:00Z")),
        )
        val fresh = mem.episodic.record("release checklist", RecordOptions(importance = 9u))
        val hits = mem.episodic.search("release checklist", SearchOptions(rankByUtility = true))
        assertEquals(listOf(fresh, old), hits.map { it.episode.id })
        assertTrue(hits[0].score > hits[1].score)
    }
}
