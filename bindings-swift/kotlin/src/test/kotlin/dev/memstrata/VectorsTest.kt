package dev.memstrata

import java.util.Collections
import kotlin.math.abs
import kotlin.test.assertEquals
import kotlin.test.assertFailsWith
import kotlin.test.assertNull
import kotlin.test.assertTrue
import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.AfterEach
import org.junit.jupiter.api.Test

/** A deterministic toy embedding: letter counts a..p (texts sharing letters are close). */
private fun letters(text: String): List<Double> {
    val v = MutableList(16) { 0.01 }
    for (c in text) if (c in 'a'..'z') v[(c - 'a') % 16] += 1.0
    return v
}

class VectorsTest {
    private val mem = Memory()

    @AfterEach
    fun close() = runBlocking<Unit> { mem.shutdown() }

    @Test
    fun `a dimension mismatch is InvalidInput naming both dimensions`() = runBlocking<Unit> {
        mem.episodic.record("first", RecordOptions(embedding = listOf(1.0, 0.0, 0.0)))
        val e = assertFailsWith<MemstrataException.InvalidInput> {
            mem.episodic.record("second", RecordOptions(embedding = listOf(1.0, 0.0, 0.0, 0.0)))
        }
        assertTrue(e.message!!.contains("embedding has 4 dimensions, context 'default' uses 3"), e.message)
        assertTrue(e.message!!.contains("embedding"), e.message)
        assertFailsWith<MemstrataException.InvalidInput> {
            mem.semantic.store("k", "1", StoreOptions(embedding = listOf(1.0, 2.0)))
        }
        assertFailsWith<MemstrataException.InvalidInput> {
            mem.episodic.search("first", SearchOptions(embedding = listOf(1.0)))
        }
        val nan = assertFailsWith<MemstrataException.InvalidInput> {
            mem.episodic.record("nan", RecordOptions(embedding = listOf(1.0, Double.NaN, 0.0)))
        }
        assertTrue(nan.message!!.contains("finite"), nan.message)
        assertEquals(1, mem.episodic.recent().size)
    }

    @Test
    fun `hybrid search reports each list's rank and fuses them`() = runBlocking<Unit> {
        val ep = mem.episodic
        val a = ep.record("apple apple apple orchard", RecordOptions(embedding = listOf(0.0, 1.0, 0.0)))
        val b = ep.record("banana bread", RecordOptions(embedding = listOf(1.0, 0.0, 0.0)))
        val c = ep.record(
            "apple pie with a long list of other words around it",
            RecordOptions(embedding = listOf(0.6, 0.8, 0.0)),
        )
        val bm25 = ep.search("apple")
        assertEquals(listOf(a, c), bm25.map { it.episode.id })
        assertEquals(listOf(1L to null, 2L to null), bm25.map { it.bm25Rank to it.vectorRank })

        // RRF, k = 60, weights 1/1: A = 1/61 + 1/63 > C = 2/62 > B = 1/61.
        val rrf = ep.search(
            "apple",
            SearchOptions(embedding = listOf(1.0, 0.0, 0.0), fusion = "rrf", bm25Weight = 1.0, vectorWeight = 1.0, rrfK = 60.0),
        )
        assertEquals(listOf(a, c, b), rrf.map { it.episode.id })
        assertEquals(
            mapOf(a to (1L to 3L), b to (null to 1L), c to (2L to 2L)),
            rrf.associate { it.episode.id to (it.bm25Rank to it.vectorRank) },
        )
        assertTrue(abs(rrf[0].score - (1.0 / 61 + 1.0 / 63)) < 1e-6, "${rrf[0].score}")

        // Linear 0.3 / 0.7: B (cosine 1) first, A (BM25 max, cosine 0) last.
        val linear = ep.search(
            "apple",
            SearchOptions(embedding = listOf(1.0, 0.0, 0.0), fusion = "linear", bm25Weight = 0.3, vectorWeight = 0.7),
        )
        assertEquals(b, linear.first().episode.id)
        assertEquals(a, linear.last().episode.id)

        // Pure vector search: empty query, score = cosine.
        val pure = ep.search("", SearchOptions(embedding = listOf(1.0, 0.0, 0.0)))
        assertEquals(listOf(b, c, a), pure.map { it.episode.id })
        assertEquals(listOf(1L, 2L, 3L), pure.map { it.vectorRank })
        assertTrue(pure.all { it.bm25Rank == null })

        val fusion = assertFailsWith<MemstrataException.InvalidInput> {
            ep.search("apple", SearchOptions(embedding = listOf(1.0, 0.0, 0.0), fusion = "max"))
        }
        assertTrue(fusion.message!!.contains("fusion"), fusion.message)

        mem.semantic.store("fruit", "\"apples and pears\"", StoreOptions(embedding = listOf(1.0, 0.0, 0.0)))
        mem.semantic.store("tools", "\"hammers\"", StoreOptions(embedding = listOf(0.0, 1.0, 0.0)))
        val k = mem.semantic.query("hammers", QueryOptions(embedding = listOf(0.9, 0.1, 0.0), fusion = "rrf"))
        assertEquals(
            mapOf("fruit" to (null to 1L), "tools" to (1L to 2L)),
            k.associate { it.key to (it.bm25Rank to it.vectorRank) },
        )
        assertEquals(listOf("tools"), mem.semantic.query("hammers", QueryOptions(limit = 5u)).map { it.key })
    }

    @Test
    fun `the embedder callback is used on record, store and search`() = runBlocking<Unit> {
        val seen = Collections.synchronizedList(mutableListOf<List<String>>())
        mem.setEmbedder(embedder { texts -> seen.add(texts); texts.map(::letters) })
        val id = mem.episodic.record("abc abc", RecordOptions(content = """{"note":"cab"}"""))
        mem.episodic.record("xyz mno")
        mem.semantic.store("fact", "\"abba\"")
        assertEquals(listOf(listOf("abc abc\nnote cab"), listOf("xyz mno"), listOf("fact\nabba")), seen.toList())
        val hits = mem.episodic.search("bca")
        assertEquals(listOf("bca"), seen.last())
        assertEquals(id, hits.first().episode.id)
        assertEquals(null to 1L, hits.first().bm25Rank to hits.first().vectorRank)
        assertEquals("fact", mem.semantic.query("abab").first().key)
        // An explicit embedding is used as given; an empty query does not embed.
        val n = seen.size
        mem.episodic.search("bca", SearchOptions(embedding = letters("xyz")))
        mem.episodic.search("")
        assertEquals(n, seen.size)
        mem.setEmbedder(null)
        assertTrue(mem.episodic.search("bca").isEmpty())
    }

    @Test
    fun `an embedder that throws fails the call with InvalidInput and stores nothing`() = runBlocking<Unit> {
        mem.setEmbedder(object : Embedder {
            override fun embed(texts: List<String>): List<List<Double>> = throw EmbedderException.Failed("model server down")
        })
        val e = assertFailsWith<MemstrataException.InvalidInput> { mem.episodic.record("x") }
        assertTrue(e.message!!.contains("embedder") && e.message!!.contains("model server down"), e.message)
        mem.setEmbedder(embedder { throw IllegalStateException("out of memory") })
        val e2 = assertFailsWith<MemstrataException.InvalidInput> { mem.semantic.store("k", "1") }
        assertTrue(e2.message!!.contains("out of memory"), e2.message)
        mem.setEmbedder(embedder { texts -> texts.map { listOf(Double.NaN) } })
        assertFailsWith<MemstrataException.InvalidInput> { mem.episodic.search("x") }
        mem.setEmbedder(embedder { listOf(listOf(1.0), listOf(2.0)) })
        val e3 = assertFailsWith<MemstrataException.InvalidInput> { mem.episodic.record("y") }
        assertTrue(e3.message!!.contains("2 vectors"), e3.message)
        assertTrue(mem.episodic.recent().isEmpty())
        assertNull(mem.semantic.get("k"))
    }
}
