package dev.memstrata

import java.nio.file.Path
import java.util.concurrent.CountDownLatch
import java.util.concurrent.Executors
import java.util.concurrent.TimeUnit
import kotlin.test.assertEquals
import kotlin.test.assertTrue
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.async
import kotlinx.coroutines.awaitAll
import kotlinx.coroutines.asCoroutineDispatcher
import kotlinx.coroutines.coroutineScope
import kotlinx.coroutines.launch
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withContext
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.io.TempDir

class ConcurrencyTest {
    @Test
    fun `many coroutines write and read one store`() = runBlocking<Unit> {
        val mem = Memory()
        coroutineScope {
            (0 until 200).map { i ->
                async(Dispatchers.Default) {
                    when (i % 4) {
                        0 -> mem.shortTerm.store("k$i", "$i")
                        1 -> mem.episodic.record("event number $i", RecordOptions(tags = listOf("load")))
                        2 -> mem.semantic.store("fact:$i", """{"i":$i}""")
                        else -> mem.working.addToWorkspace("$i")
                    }
                }
            }.awaitAll()
        }
        assertEquals(50, mem.shortTerm.keys().size)
        assertEquals(50, mem.semantic.keys(prefix = "fact:").size)
        assertEquals(50, mem.episodic.search("", SearchOptions(tags = listOf("load"), limit = 100u)).size)
        // Working memory keeps its configured capacity (64) of the 50 added.
        assertEquals(50, mem.working.workspace().size)
        val reads = coroutineScope {
            (0 until 200 step 4).map { i -> async(Dispatchers.IO) { mem.shortTerm.retrieve("k$i") } }.awaitAll()
        }
        assertEquals((0 until 200 step 4).map { "$it" }, reads)
        mem.shutdown()
    }

    @Test
    fun `two handles on one path share the engine`(@TempDir dir: Path) = runBlocking<Unit> {
        val path = dir.resolve("shared.mem").toString()
        val a = Memory(path)
        val b = Memory(path)
        a.semantic.store("from-a", "1")
        b.semantic.store("from-b", "2")
        assertEquals("2", a.semantic.retrieve("from-b"))
        assertEquals("1", b.semantic.retrieve("from-a"))
        a.episodic.record("written through a")
        assertEquals(1, b.episodic.search("written").size)
        a.shutdown()
        // Closing one handle leaves the other (and the engine) open.
        assertEquals("1", b.semantic.retrieve("from-a"))
        b.shutdown()
    }

    @Test
    fun `a suspended call leaves its thread free`() {
        // One thread for every coroutine below. The procedure's host action
        // waits until a second coroutine, on that same thread, has stored a
        // value. If `execute` blocked its thread while the engine works, the
        // second coroutine could never run and the action would wait forever.
        val single = Executors.newSingleThreadExecutor().asCoroutineDispatcher()
        val mem = Memory()
        val released = CountDownLatch(1)
        val gate = actionHandler("wait" to { _ ->
            check(released.await(60, TimeUnit.SECONDS)) { "the caller's thread was blocked" }
            kotlinx.serialization.json.JsonPrimitive("released")
        })
        runBlocking {
            mem.procedural.learn("gated", """[{"id": "w", "action": "wait"}]""")
            val run = withContext(single) {
                val started = async { mem.procedural.execute("gated", handler = gate) }
                launch {
                    mem.shortTerm.store("meanwhile", "true")
                    released.countDown()
                }
                started.await()
            }
            assertEquals("completed", run.status, run.error)
            assertEquals("true", mem.shortTerm.retrieve("meanwhile"))
            mem.shutdown()
        }
        single.close()
        assertTrue(released.count == 0L)
    }
}
