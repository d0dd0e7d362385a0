package dev.memstrata

import java.nio.file.Path
import kotlin.test.assertEquals
import kotlin.test.assertFailsWith
import kotlin.test.assertTrue
import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.io.TempDir

class ErrorsTest {
    @Test
    fun `a postgres URL reaches PostgreSQL on the desktop library, its password masked`() {
        // The JVM library for Linux and Windows is built with the PostgreSQL backend
        // (iOS and Android builds are not): an unreachable server is a Storage error
        // that names the URL with its password masked. Port 1 is closed on loopback.
        val e = assertFailsWith<MemstrataException.Storage> {
            Memory("postgres://app:secret@127.0.0.1:1/memstrata?schema=x")
        }
        assertTrue(e.message!!.contains("postgres://app:***@127.0.0.1:1/memstrata"), e.message)
        assertTrue(!e.message!!.contains("secret"), e.message)
        // Nothing was created for it in the working directory.
        assertTrue(!java.io.File("postgres:").exists())
    }

    @Test
    fun `a store URL's password never shows, however the URL is written`() {
        // The scheme in any case is a URL (never a directory named after it), and a
        // password in the user info or a password= parameter stays out of every message.
        for (url in listOf(
            "POSTGRES://app:hunter2@127.0.0.1:1/memstrata",
            "PostgreSQL://app@127.0.0.1:1/memstrata?password=hunter2",
            "postgres://app@127.0.0.1:1/memstrata?schema=x&PassWord=hunter2",
            "postgres://app@127.0.0.1:1/memstrata?sslpassword=hunter2",
        )) {
            // Refused by the URL check or the client (unknown option), or a failed
            // connection: whichever, the message is the core's and never the password.
            val e = assertFailsWith<MemstrataException> { Memory(url) }
            val shown = "${e.message} $e ${e.stackTraceToString()}"
            assertTrue(e.message!!.contains("postgres", ignoreCase = true), shown)
            assertTrue(!shown.contains("hunter2"), shown)
        }
        assertTrue(!java.io.File("POSTGRES:").exists())
        assertTrue(!java.io.File("PostgreSQL:").exists())
    }

    @Test
    fun `each kind of failure throws its own case with the core's message`(@TempDir dir: Path) = runBlocking<Unit> {
        val mem = Memory()

        val notFound = assertFailsWith<MemstrataException.NotFound> { mem.semantic.update("nope", "{}") }
        assertTrue(notFound.message!!.contains("nope"), notFound.message)

        val emptyKey = assertFailsWith<MemstrataException.InvalidInput> { mem.shortTerm.store("", "1") }
        assertTrue(emptyKey.message!!.contains("`key`"), emptyKey.message)

        val badJson = assertFailsWith<MemstrataException.InvalidInput> { mem.shortTerm.store("k", "{not json") }
        assertTrue(badJson.message!!.contains("`value`"), badJson.message)

        val badTtl = assertFailsWith<MemstrataException.InvalidInput> { mem.shortTerm.store("k", "1", ttl = -1.0) }
        assertTrue(badTtl.message!!.contains("ttl"), badTtl.message)

        val tooMany = assertFailsWith<MemstrataException.LimitExceeded> {
            mem.episodic.record("x", RecordOptions(tags = (1..65).map { "t$it" }))
        }
        assertTrue(tooMany.message!!.contains("64"), tooMany.message)

        val io = assertFailsWith<MemstrataException.Io> { mem.importFrom(dir.resolve("missing.jsonl").toString()) }
        assertTrue(io.message!!.contains("missing.jsonl"), io.message)

        val task = mem.punchIn("m", "t")
        mem.punchOut(task.taskId, "done")
        assertFailsWith<MemstrataException.Conflict> { mem.punchOut(task.taskId, "again") }

        val badLevel = assertFailsWith<MemstrataException.InvalidInput> { mem.optimize(level = "extreme") }
        assertTrue(badLevel.message!!.contains("level"), badLevel.message)

        mem.shutdown()
    }

    @Test
    fun `a closed handle and its layer objects fail with Closed, closing twice is fine`() = runBlocking<Unit> {
        val mem = Memory()
        val st = mem.shortTerm
        st.store("k", "1")
        mem.shutdown()
        assertTrue(mem.isClosed())
        assertFailsWith<MemstrataException.Closed> { st.retrieve("k") }
        assertFailsWith<MemstrataException.Closed> { mem.status() }
        assertFailsWith<MemstrataException.Closed> { mem.activeContext() }
        mem.shutdown()
    }

    @Test
    fun `a panic inside the library is an Internal error and nothing crashes`() = runBlocking<Unit> {
        val mem = Memory()
        mem.shortTerm.store("before", "1")
        val e = assertFailsWith<MemstrataException.Internal> { panicForTests() }
        assertTrue(e.message!!.contains("deliberate panic"), e.message)
        // The process, the pool and the store are all still usable.
        assertEquals("1", mem.shortTerm.retrieve("before"))
        assertFailsWith<MemstrataException.Internal> { panicForTests() }
        mem.shortTerm.store("after", "2")
        assertEquals(listOf("after", "before"), mem.shortTerm.keys())
        mem.shutdown()
    }

    @Test
    fun `every error is a MemstrataException`() = runBlocking<Unit> {
        val mem = Memory()
        val e: MemstrataException = assertFailsWith<MemstrataException> { mem.sessionRestore("none") }
        assertTrue(e is MemstrataException.NotFound, "$e")
        mem.shutdown()
    }

    @Test
    fun `a handle used after fork() is its own case, Forked`() {
        // A JVM does not fork a live engine; the case is checked to exist and to be
        // a MemstrataException carrying the core's message (docs/multiprocess.md).
        val e: MemstrataException = MemstrataException.Forked("this Memory was opened in process 1, and this is process 2")
        assertTrue(e is MemstrataException.Forked, "$e")
        assertTrue(e.message!!.contains("process 1"), e.message)
    }
}
