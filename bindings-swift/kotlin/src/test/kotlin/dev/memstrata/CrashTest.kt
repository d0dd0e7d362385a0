package dev.memstrata

import java.io.File
import java.nio.file.Path
import java.util.concurrent.TimeUnit
import kotlin.test.assertEquals
import kotlin.test.assertFailsWith
import kotlin.test.assertTrue
import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.io.TempDir

/**
 * The writer process of [CrashTest]: opens the store with `immediate`
 * durability and writes until killed, printing `ack <i>` after each write
 * returns (that is: after the engine acknowledged it).
 */
object CrashWriter {
    @JvmStatic
    fun main(args: Array<String>) = runBlocking<Unit> {
        val mem = Memory(args[0], OpenOptions(durability = "immediate"))
        println("open")
        System.out.flush()
        var i = 0
        while (true) {
            when (i % 3) {
                0 -> mem.shortTerm.store("k$i", "$i")
                1 -> mem.semantic.store("fact:$i", """{"i":$i}""")
                else -> mem.episodic.record("episode $i", RecordOptions(tags = listOf("crash")))
            }
            println("ack $i")
            System.out.flush()
            i++
        }
    }
}

class CrashTest {
    @Test
    fun `a process killed with SIGKILL during immediate writes loses nothing acknowledged`(@TempDir dir: Path) {
        val path = dir.resolve("crash.mem").toString()
        val java = File(System.getProperty("java.home"), "bin/java").path
        val child = ProcessBuilder(
            java,
            "-cp", System.getProperty("java.class.path"),
            "-Djna.library.path=" + System.getProperty("jna.library.path"),
            CrashWriter::class.java.name,
            path,
        ).redirectError(ProcessBuilder.Redirect.INHERIT).start()
        val lines = child.inputStream.bufferedReader()
        assertEquals("open", lines.readLine())

        // While the child holds the store, this process cannot open it.
        runBlocking {
            val e = assertFailsWith<MemstrataException.StoreLocked> { Memory(path) }
            assertTrue(e.message!!.isNotEmpty())
        }

        var acked = -1
        while (acked < 150) {
            val line = lines.readLine() ?: error("the writer exited early (exit ${child.waitFor()})")
            acked = line.removePrefix("ack ").toInt()
        }
        // SIGKILL (destroyForcibly on Unix), in the middle of the write loop.
        // Writes acknowledged after the last line read here are not checked.
        child.destroyForcibly()
        assertTrue(child.waitFor(60, TimeUnit.SECONDS))
        assertEquals(128 + 9, child.exitValue(), "the writer must die by SIGKILL")

        runBlocking {
            val mem = Memory(path)
            for (i in 0..acked) {
                when (i % 3) {
                    0 -> assertEquals("$i", mem.shortTerm.retrieve("k$i"), "short-term k$i")
                    1 -> assertEquals("""{"i":$i}""", mem.semantic.retrieve("fact:$i"), "semantic fact:$i")
                }
            }
            val episodes = mem.episodic.search("", SearchOptions(tags = listOf("crash"), limit = 1000u))
                .map { it.episode.summary }.toSet()
            for (i in 0..acked) {
                if (i % 3 == 2) assertTrue("episode $i" in episodes, "episode $i lost")
            }
            mem.shutdown()
        }
    }
}
