package dev.memstrata

import java.util.concurrent.atomic.AtomicInteger
import kotlin.test.assertEquals
import kotlin.test.assertFailsWith
import kotlin.test.assertNotNull
import kotlin.test.assertNull
import kotlin.test.assertTrue
import kotlinx.coroutines.runBlocking
import kotlinx.serialization.json.JsonPrimitive
import kotlinx.serialization.json.buildJsonObject
import kotlinx.serialization.json.int
import kotlinx.serialization.json.jsonObject
import kotlinx.serialization.json.jsonPrimitive
import kotlinx.serialization.json.put
import org.junit.jupiter.api.AfterEach
import org.junit.jupiter.api.Test

class ProceduresTest {
    private val mem = Memory()
    private val steps = """
        [
          {"id": "a", "action": "double", "parameters": {"n": "{{ params.n }}"}, "next": "b"},
          {"id": "b", "action": "ask_human", "parameters": {"q": "ok?"}}
        ]
    """

    @AfterEach
    fun close() = runBlocking<Unit> { mem.shutdown() }

    private val double = "double" to { p: kotlinx.serialization.json.JsonElement ->
        JsonPrimitive(p.jsonObject.getValue("n").jsonPrimitive.int * 2)
    }

    @Test
    fun `learn, get, list, update and forget procedures`() = runBlocking<Unit> {
        val p = mem.procedural.learn("flow", steps)
        assertEquals(1L, p.version)
        assertEquals(2, p.steps.size)
        assertEquals("a", p.steps[0].toJsonElement().jsonObject.getValue("id").jsonPrimitive.content)
        assertEquals(listOf("flow"), mem.procedural.list())
        assertFailsWith<MemstrataException.Conflict> { mem.procedural.learn("flow", steps) }
        assertEquals(2L, mem.procedural.update("flow", steps).version)
        assertNotNull(mem.procedural.get("flow"))
        assertTrue(mem.procedural.forget("flow"))
        assertNull(mem.procedural.get("flow"))
        assertFailsWith<MemstrataException.InvalidInput> { mem.procedural.learn("bad", """[{"id": "x"}]""") }
    }

    @Test
    fun `a host action returns its output, a missing one pauses and resume continues`() = runBlocking<Unit> {
        mem.procedural.learn("flow", steps)
        val run = mem.procedural.execute("flow", params = """{"n": 21}""", handler = actionHandler(double))
        assertEquals("awaiting_action", run.status)
        assertEquals(JsonPrimitive(42), run.outputsJson.jsonObject["a"])
        val pending = run.pending!!
        assertEquals("ask_human", pending.action)
        assertEquals("b", pending.step)
        assertEquals("""{"q":"ok?"}""", pending.parameters)

        val done = mem.procedural.resume(run.runId, output = """{"answer": "yes"}""")
        assertEquals("completed", done.status)
        assertEquals(buildJsonObject { put("answer", "yes") }, done.outputsJson.jsonObject["b"])
        assertEquals(listOf("a", "b"), done.trace.map { it.step })
        assertNotNull(done.finishedAt)
        assertEquals("completed", mem.procedural.run(run.runId)!!.status)
        assertFailsWith<MemstrataException.Conflict> { mem.procedural.resume(run.runId, output = "1") }
    }

    @Test
    fun `a throwing host action fails the step with its message`() = runBlocking<Unit> {
        mem.procedural.learn("flow", steps)
        val viaActionException = object : ActionHandler {
            override fun actions() = listOf("double")
            override fun call(action: String, parameters: String): String =
                throw ActionException.Failed("quota exhausted")
        }
        val r1 = mem.procedural.execute("flow", """{"n": 1}""", viaActionException)
        assertEquals("failed", r1.status)
        assertTrue(r1.error!!.contains("quota exhausted"), r1.error)
        assertTrue(r1.trace.single().error!!.contains("quota exhausted"))

        val viaAnyException = actionHandler("double" to { _ -> throw IllegalStateException("disk on fire") })
        val r2 = mem.procedural.execute("flow", """{"n": 1}""", viaAnyException)
        assertEquals("failed", r2.status)
        assertTrue(r2.error!!.contains("disk on fire"), r2.error)

        val notJson = object : ActionHandler {
            override fun actions() = listOf("double")
            override fun call(action: String, parameters: String) = "{oops"
        }
        val r3 = mem.procedural.execute("flow", """{"n": 1}""", notJson)
        assertEquals("failed", r3.status)
        assertTrue(r3.error!!.contains("not valid JSON"), r3.error)
        // The engine is unaffected.
        mem.shortTerm.store("still", "true")
        assertEquals("true", mem.shortTerm.retrieve("still"))
    }

    @Test
    fun `registered actions serve every handle and may call back into the store`() = runBlocking<Unit> {
        mem.procedural.learn("flow", steps)
        val calls = AtomicInteger()
        mem.procedural.registerAction("double", actionHandler(double))
        mem.procedural.registerAction("ask_human", object : ActionHandler {
            override fun actions() = listOf("ask_human")
            override fun call(action: String, parameters: String): String {
                calls.incrementAndGet()
                // A host action runs on a worker thread with no engine lock held.
                runBlocking { mem.shortTerm.store("asked", parameters) }
                return "\"yes\""
            }
        })
        assertEquals(listOf("ask_human", "double"), mem.procedural.registeredActions())
        val run = mem.namespace("default").procedural.execute("flow", """{"n": 5}""")
        assertEquals("completed", run.status, run.error)
        assertEquals(JsonPrimitive(10), run.outputsJson.jsonObject["a"])
        assertEquals(1, calls.get())
        assertEquals("""{"q":"ok?"}""", mem.shortTerm.retrieve("asked"))
        assertTrue(mem.procedural.unregisterAction("ask_human"))
        val paused = mem.procedural.execute("flow", """{"n": 5}""")
        assertEquals("awaiting_action", paused.status)
    }
}
