// Shared helpers of the node:test suite.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import assert from 'node:assert/strict'

import { MemstrataError } from '../index.mjs'

/** A fresh directory, removed when the test ends (close stores opened in it before that). */
export function tempDir(t) {
  const dir = mkdtempSync(join(tmpdir(), 'memstrata-node-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

/** Assert that `promise` rejects with a MemstrataError of `code` (and `field`, when given). */
export async function rejectsWith(promise, code, field) {
  assert.ok(promise instanceof Promise, 'the call returns a Promise')
  await assert.rejects(promise, (e) => {
    assert.ok(e instanceof MemstrataError, `a MemstrataError, got ${e}`)
    assert.ok(e instanceof Error)
    assert.equal(e.code, code, e.message)
    if (field !== undefined) assert.equal(e.field, field, e.message)
    return true
  })
}
