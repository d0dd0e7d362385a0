package dev.memstrata

import java.time.Instant
import kotlin.test.assertEquals
import kotlin.test.assertFailsWith
import kotlin.test.assertNull
import kotlin.test.assertTrue
import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.AfterEach
import org.junit.jupiter.api.Test

/** Facts with validity and as-of reads (the core's validity suite covers the semantics). */
class ValidityTest {
    private val start = Instant.parse("2031-06-01T10:00:00Z")
    private val clock = ManualClock(start)
    private val mem = Memory(clock = clock)

    @AfterEach
    fun close() = runBlocking<Unit> { mem.shutdown() }

    @Test
    fun `supersession, asOf reads and includeExpired`() = runBlocking<Unit> {
        val s = mem.semantic
        val k1 = s.store("ceo", """{"name":"Ada"}""")
        assertEquals(start, k1.validFrom)
        assertNull(k1.validUntil)
        clock.advance(60.0)
        val k2 = s.update("ceo", """{"name":"Grace"}""")
        assertEquals(start.plusSeconds(60), k2.validFrom)
        assertEquals(start.plusSeconds(60), s.history("ceo")[0].validUntil)
        assertEquals("""{"name":"Ada"}""", s.retrieve("ceo", asOf = start.plusSeconds(30)))
        assertEquals(1L, s.get("ceo", asOf = start.plusSeconds(30))!!.version)
        assertNull(s.get("ceo", asOf = start.minusSeconds(1)))
        val hits = s.query("Grace", QueryOptions(asOf = start.plusSeconds(30)))
        assertEquals(listOf("""{"name":"Ada"}"""), hits.map { it.knowledge })
        assertEquals(start.plusSeconds(60), hits[0].validUntil)

        s.store("promo", """{"text":"spring discount"}""", StoreOptions(validUntil = start.plusSeconds(3600)))
        assertEquals(1, s.query("discount").size)
        clock.advance(3600.0)
        assertEquals(0, s.query("discount").size)
        assertEquals(1, s.query("discount", QueryOptions(includeExpired = true)).size)
        val bad = assertFailsWith<MemstrataException.InvalidInput> {
            s.update("ceo", "{}", UpdateOptions(validUntil = start))
        }
        assertTrue(bad.message!!.contains("valid_until"), bad.message)
        val out = s.storeMany(listOf(KnowledgeItem(key = "a", knowledge = "1", validFrom = start)))
        assertEquals(start, out[0].validFrom)
    }

    @Test
    fun `episodes asOf are what had been recorded by then`() = runBlocking<Unit> {
        val ep = mem.episodic
        val a = ep.record("billing deploy")
        clock.advance(60.0)
        val b = ep.record("billing outage", RecordOptions(timestamp = start.minusSeconds(86400)))
        assertEquals(start.plusSeconds(60), ep.get(b)!!.recordedAt)
        val half = start.plusSeconds(30)
        assertEquals(listOf(a), ep.search("billing", SearchOptions(asOf = half)).map { it.episode.id })
        assertEquals(2, ep.search("billing").size)
        assertEquals(listOf(a), ep.recent(asOf = half).map { it.id })
    }
}
