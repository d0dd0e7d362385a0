package dev.memstrata

import java.io.File
import java.nio.file.Path
import java.time.Instant
import java.util.Collections
import kotlin.test.assertEquals
import kotlin.test.assertFalse
import kotlin.test.assertNotNull
import kotlin.test.assertNull
import kotlin.test.assertTrue
import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.AfterEach
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.io.TempDir

class ContinuityTest {
    private val start = Instant.parse("2031-06-01T10:00:00Z")
    private val clock = ManualClock(start)
    private val mem = Memory(clock = clock)

    @AfterEach
    fun close() = runBlocking<Unit> { mem.shutdown() }

    @Test
    fun `sessions save versions at every compression level and restore them`() = runBlocking<Unit> {
        val s = mem.sessionCreate("refactor", metadata = """{"repo":"x"}""")
        assertEquals(start, s.createdAt)
        val saved = (0u..3u).map { level -> mem.sessionSave(s.sessionId, """{"step":$level}""", compressionLevel = level) }
        assertEquals(listOf(1L, 2L, 3L, 4L), saved.map { it.version })
        val latest = mem.sessionRestore(s.sessionId)
        assertEquals("""{"step":3}""", latest.content)
        assertEquals("""{"repo":"x"}""", latest.metadata)
        assertEquals("""{"step":1}""", mem.sessionRestore(s.sessionId, version = 2L).content)
        mem.sessionSaveValue(s.sessionId, mapOf("step" to 9))
        assertEquals(mapOf("step" to 9), mem.sessionRestore(s.sessionId).contentAs<Map<String, Int>>())
        val info = mem.sessionList().single()
        assertEquals("refactor", info.name)
        assertEquals(5L, info.latestVersion)
        assertEquals(listOf(0u, 1u, 2u, 3u, 1u), mem.sessionVersions(s.sessionId).map { it.compressionLevel })
        assertTrue(mem.sessionDelete(s.sessionId))
        assertFalse(mem.sessionDelete(s.sessionId))
        assertTrue(mem.sessionList().isEmpty())
    }

    @Test
    fun `contexts switch, namespaces are separate and context values cross them`() = runBlocking<Unit> {
        assertEquals("default", mem.activeContext())
        mem.shortTerm.store("k", "1")
        val proj = mem.namespace("proj")
        assertEquals("proj", proj.activeContext())
        assertNull(proj.shortTerm.retrieve("k"))
        proj.shortTerm.store("k", "2")
        assertEquals("1", mem.shortTerm.retrieve("k"))

        val sw = mem.switchContext("proj")
        assertEquals("default", sw.previousContext)
        assertTrue(sw.contextLoaded)
        assertEquals("2", mem.shortTerm.retrieve("k"))
        assertEquals(listOf("default", "proj"), mem.contexts())

        val stored = mem.contextStore("shared", "\"v\"", ttl = 60.0, namespace = "other")
        assertEquals(start.plusSeconds(60), stored.expiresAt)
        assertEquals("\"v\"", mem.contextRetrieve("shared", namespace = "other")!!.value)
        assertNull(mem.contextRetrieve("shared"))
        proj.shutdown()
        assertEquals("2", mem.shortTerm.retrieve("k"))
    }

    @Test
    fun `the timesheet measures tasks with the injected clock`() = runBlocking<Unit> {
        val t = mem.punchIn("claude", "write the swift binding")
        assertEquals(start, t.startTime)
        clock.advance(90.0)
        val out = mem.punchOut(t.taskId, "done")
        assertEquals(90.0, out.durationSeconds)
        val task = mem.task(t.taskId)!!
        assertEquals("closed", task.status)
        assertEquals("done", task.summary)
        assertNotNull(task.episodeId)
        assertEquals(1, mem.tasks(TaskFilterOptions(llmName = "claude")).size)
        assertTrue(mem.tasks(TaskFilterOptions(status = "open")).isEmpty())
        val report = mem.timesheetReport()
        assertEquals(1L, report.tasks)
        assertEquals("claude", report.llms.single().llmName)
        assertEquals(90.0, report.llms.single().totalSeconds)
        assertNull(mem.task("nope"))
        assertNull(task.context)
        assertEquals("default", task.namespace)
        val other = mem.punchIn("gpt", "review", context = "free text: PR #7", namespace = "proj")
        val otherTask = mem.task(other.taskId)!!
        assertEquals("free text: PR #7", otherTask.context)
        assertEquals("proj", otherTask.namespace)
        assertEquals(listOf(other.taskId), mem.tasks(TaskFilterOptions(namespace = "proj")).map { it.taskId })
    }

    @Test
    fun `status reports health and metrics`() = runBlocking<Unit> {
        mem.episodic.record("something happened")
        val st = mem.status(includeMetrics = true)
        assertEquals("healthy", st.status)
        assertEquals(memstrataVersion(), st.version)
        assertEquals(0, st.activeSessions!!.size)
        assertEquals(0L, st.sessionCount)
        val metrics = st.metrics!!
        assertEquals(1L, metrics.items.episodes)
        assertTrue(metrics.operations.getValue("episodic.record").count >= 1L)
        assertNull(mem.status(includeSessions = false).activeSessions)
        assertNull(mem.status(includeSessions = false).sessionCount)
        val created = mem.sessionCreate("s")
        val active = mem.status().activeSessions!!.single()
        assertEquals(created.sessionId, active.sessionId)
        assertEquals("s", active.name)
        assertEquals(created.createdAt, active.createdAt)
        assertEquals(1L, mem.status().sessionCount)
        val info = memstrataInfo()
        assertEquals("default", info.defaultContext)
        assertTrue(info.builtinActions.isNotEmpty())
    }

    @Test
    fun `optimize and import report progress, export and import round-trip`(@TempDir dir: Path) = runBlocking<Unit> {
        mem.semantic.store("user:alice", """{"role":"admin"}""")
        val s = mem.sessionCreate("s")
        repeat(3) { mem.sessionSave(s.sessionId, """{"i":$it}""") }
        val seen = Collections.synchronizedList(mutableListOf<ProgressEvent>())
        val report = mem.optimize(level = "medium", progress = progressListener { seen.add(it) })
        assertTrue(report.success)
        assertTrue(seen.any { it.stage == ProgressStage.SWEEP }, "$seen")
        assertTrue(seen.any { it.stage == ProgressStage.PRUNE_SESSIONS }, "$seen")
        assertTrue(seen.any { it.stage == ProgressStage.FLUSH }, "$seen")

        val file = dir.resolve("backup.jsonl").toString()
        val exported = mem.exportTo(file)
        assertTrue(exported.records >= 2L)
        assertEquals(1L, exported.counts["knowledge"])
        assertTrue(File(file).length() > 0)

        val other = Memory()
        val imports = Collections.synchronizedList(mutableListOf<ProgressEvent>())
        val imported = other.importFrom(file, progress = progressListener { imports.add(it) })
        assertEquals(exported.records, imported.records)
        assertEquals("""{"role":"admin"}""", other.semantic.retrieve("user:alice"))
        assertEquals(listOf(ProgressStage.VALIDATE, ProgressStage.APPLY), imports.map { it.stage }.distinct())
        val applied = imports.filter { it.stage == ProgressStage.APPLY }
        assertEquals(applied.map { it.done }.sorted(), applied.map { it.done })
        other.shutdown()
    }

    @Test
    fun `a store reopened from its path keeps everything`(@TempDir dir: Path) = runBlocking<Unit> {
        val path = dir.resolve("agent.mem").toString()
        val a = Memory.open(path, OpenOptions(durability = "immediate"))
        assertFalse(a.isTemporary())
        assertTrue(a.path().endsWith("agent.mem"))
        a.semantic.store("k", "[1,2]")
        a.episodic.record("kept across reopen")
        a.shutdown()
        assertTrue(a.isClosed())
        val b = Memory(path)
        assertEquals("[1,2]", b.semantic.retrieve("k"))
        assertEquals("kept across reopen", b.episodic.search("reopen").single().episode.summary)
        b.shutdown()
    }

    @Test
    fun `the MCP memory server's knowledge graph imports into semantic memory`(@TempDir dir: Path) = runBlocking<Unit> {
        val file = dir.resolve("memory.jsonl").toFile()
        file.writeText(
            """{"type":"entity","name":"alice","entityType":"person","observations":["likes tea"]}""" + "\n" +
                """{"type":"relation","from":"alice","to":"infra","relationType":"works_on"}""" + "\n",
        )
        val stats = mem.importKnowledgeGraph(file.path)
        assertTrue(stats.records >= 2L, "$stats")
        val alice = mem.semantic.retrieve("entity:alice")!!.toJsonElement().toString()
        assertTrue(alice.contains("likes tea") && alice.contains("works_on"), alice)
        mem.flush()
    }
}
