package dev.memstrata

import kotlin.test.assertEquals
import org.junit.jupiter.api.Test

class SmokeTest {
    @Test
    fun `the library loads and reports its version`() {
        assertEquals("0.1.0", memstrataVersion())
    }
}
