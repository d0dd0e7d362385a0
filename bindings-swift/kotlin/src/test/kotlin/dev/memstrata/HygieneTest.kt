package dev.memstrata

import kotlin.test.assertEquals
import kotlin.test.assertFailsWith
import kotlin.test.assertFalse
import kotlin.test.assertNotNull
import kotlin.test.assertNull
import kotlin.test.assertTrue
import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.AfterEach
import org.junit.jupiter.api.Test

private const val TEXT = "Deployed version 2.4 of the billing service to staging"

/** Duplicates caught on write: onDuplicate per call and per context (the core's suite covers the detector). */
class HygieneTest {
    private val mem = Memory()

    @AfterEach
    fun close() = runBlocking<Unit> { mem.shutdown() }

    @Test
    fun `recordDetailed and every onDuplicate policy`() = runBlocking<Unit> {
        val ep = mem.episodic
        val first = ep.recordDetailed(TEXT, RecordOptions(tags = listOf("deploy"), importance = 4u))
        assertTrue(first.created)
        assertNull(first.duplicateOf)
        assertEquals("keep", first.onDuplicate)
        // keep in a context that never asked for another policy: no detection.
        val kept = ep.recordDetailed(TEXT)
        assertNull(kept.duplicateOf)
        ep.forget(kept.id)
        assertEquals(first.id, ep.record(TEXT, RecordOptions(onDuplicate = "skip")))
        val merged = ep.recordDetailed(
            TEXT,
            RecordOptions(tags = listOf("staging"), importance = 9u, onDuplicate = "merge"),
        )
        assertFalse(merged.created)
        assertEquals(first.id, merged.id)
        val got = ep.get(first.id)!!
        assertEquals(listOf("deploy", "staging"), got.tags)
        assertEquals(9u, got.importance)
        assertEquals(2L, got.seenCount)
        assertNotNull(got.lastSeen)
        val linked = ep.record(TEXT, RecordOptions(onDuplicate = "link"))
        assertEquals(first.id, ep.get(linked)!!.duplicateOf)
        // Once the context has a dedup index, keep names the duplicate too.
        assertEquals(first.id, ep.recordDetailed(TEXT).duplicateOf)
        // Batch items take onDuplicate.
        val ids = ep.recordMany(
            listOf(
                EpisodeItem(summary = "A fresh fact about the deployment pipeline", onDuplicate = "skip"),
                EpisodeItem(summary = "a fresh fact about the deployment pipeline!", onDuplicate = "skip"),
            ),
        )
        assertEquals(ids[0], ids[1])
        val bad = assertFailsWith<MemstrataException.InvalidInput> {
            ep.record(TEXT, RecordOptions(onDuplicate = "drop"))
        }
        assertTrue(bad.message!!.contains("on_duplicate"), bad.message)
    }

    @Test
    fun `context policy and semantic store with onDuplicate`() = runBlocking<Unit> {
        assertEquals("keep", mem.onDuplicate())
        mem.setOnDuplicate("skip", namespace = "work")
        assertEquals("skip", mem.onDuplicate(namespace = "work"))
        val work = mem.namespace("work")
        val a = work.episodic.record(TEXT)
        assertEquals(a, work.episodic.record(TEXT))
        assertFailsWith<MemstrataException.InvalidInput> { mem.setOnDuplicate("never") }

        val v = """{"fact": "The customer prefers invoices by email every month"}"""
        assertNull(mem.semantic.store("billing.invoices", v).duplicateOf)
        val skipped = mem.semantic.store("crm.invoices", v, StoreOptions(onDuplicate = "skip"))
        assertEquals("billing.invoices", skipped.key)
        assertEquals("billing.invoices", skipped.duplicateOf)
        assertNull(mem.semantic.get("crm.invoices"))
        mem.semantic.store("crm.invoices", v, StoreOptions(onDuplicate = "link"))
        assertEquals("billing.invoices", mem.semantic.get("crm.invoices")!!.duplicateOf)
    }
}
