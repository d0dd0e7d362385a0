package dev.memstrata

import java.nio.file.Files
import java.nio.file.Path
import kotlin.test.assertEquals
import kotlin.test.assertTrue
import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.io.TempDir

/**
 * Encryption at rest through the Kotlin binding: distinctive words written through every layer
 * (record keys included) are in no file of an encrypted store, and are in a plaintext one (the
 * control). The core runs the full check (core/tests/sealed_keys.rs); this shows the Kotlin
 * binding's store passes it too, as bindings-python/tests/test_sealed_files.py does for Python.
 */
class SealedFilesTest {
    private val context = "CtxKtQuokka"
    private val words = linkedMapOf(
        "context" to context,
        "summary" to "KtSummaryNarwhal",
        "content" to "KtContentOcelot",
        "participant" to "KtParticipantPangolin",
        "tag" to "KtTagWombat",
        "knowledge_key" to "KtKeyAxolotl",
        "knowledge_value" to "KtValueCapybara",
        "short_key" to "KtStKeyTapir",
        "short_value" to "KtStValueMarmot",
        "session" to "KtSessionLemur",
        "procedure" to "KtProcGecko",
    )
    private fun w(name: String) = words.getValue(name)

    /** Writes every word through its layer; returns the session id. */
    private suspend fun writeWords(m: Memory): String {
        m.switchContext(context)
        m.episodic.record(
            "meeting ${w("summary")}",
            RecordOptions(
                content = """{"detail":"${w("content")}"}""",
                participants = listOf(w("participant")),
                tags = listOf(w("tag")),
            ),
        )
        m.semantic.store("user:${w("knowledge_key")}", """{"text":"${w("knowledge_value")}"}""")
        m.shortTerm.store(w("short_key"), """{"note":"${w("short_value")}"}""")
        m.procedural.learn(w("procedure"), """[{"id":"a","action":"set","parameters":{"x":1}}]""")
        val sid = m.sessionCreate("s").sessionId
        m.sessionSave(sid, """{"state":"${w("session")}"}""")
        return sid
    }

    /** Reads every word back through the API. */
    private suspend fun checkWords(m: Memory, sid: String) {
        assertTrue(context in m.contexts(), "contexts: ${m.contexts()}")
        m.switchContext(context)
        assertEquals(listOf("user:${w("knowledge_key")}"), m.semantic.keys("user:"))
        assertEquals("""{"text":"${w("knowledge_value")}"}""", m.semantic.retrieve("user:${w("knowledge_key")}"))
        assertEquals(listOf(w("short_key")), m.shortTerm.keys("KtSt"))
        assertEquals("""{"note":"${w("short_value")}"}""", m.shortTerm.retrieve(w("short_key")))
        assertEquals(listOf(w("procedure")), m.procedural.list())
        val hits = m.episodic.search(w("summary"))
        assertEquals(listOf(listOf(w("participant"))), hits.map { it.episode.participants })
        assertEquals(listOf(w("tag")), hits.single().episode.tags)
        assertEquals("""{"detail":"${w("content")}"}""", hits.single().episode.content)
        assertEquals("""{"state":"${w("session")}"}""", m.sessionRestore(sid).content)
    }

    /**
     * The names of the words found, as written or lower-cased (the index lower-cases its
     * terms), in any byte of any file under [root]. Each file is read as ISO-8859-1, which maps
     * every byte to one char, so a substring search is a byte search.
     */
    private fun foundWords(root: Path): Set<String> {
        val files = Files.walk(root).use { s -> s.filter { Files.isRegularFile(it) }.toList() }
        assertTrue(files.isNotEmpty(), "no files under $root")
        val blobs = files.map { String(Files.readAllBytes(it), Charsets.ISO_8859_1) }
        return words.filter { (_, word) ->
            listOf(word, word.lowercase()).any { form -> blobs.any { it.contains(form) } }
        }.keys
    }

    @Test
    fun `no word of any layer is in the files of an encrypted store`(@TempDir dir: Path) = runBlocking<Unit> {
        val plain = dir.resolve("plain.mem")
        Memory.open(plain.toString()).let { m ->
            val sid = writeWords(m)
            checkWords(m, sid)
            m.shutdown()
        }
        assertEquals(words.keys, foundWords(plain), "control: every word is in a plaintext store")

        val sealed = dir.resolve("sealed.mem")
        val key = ByteArray(32) { (it + 1).toByte() }
        val sid = Memory.open(sealed.toString(), OpenOptions(encryptionKey = key)).let { m ->
            val sid = writeWords(m)
            checkWords(m, sid)
            m.shutdown()
            sid
        }
        assertEquals(emptySet(), foundWords(sealed), "words readable in the files of an encrypted store")

        val again = Memory.open(sealed.toString(), OpenOptions(encryptionKey = key))
        checkWords(again, sid)
        again.shutdown()
        assertEquals(emptySet(), foundWords(sealed), "words readable after reopening the encrypted store")
    }
}
