// Encryption at rest: a store opened with `encryptionKey` (a 32-byte Buffer) needs
// that key again; a wrong, missing or malformed key rejects with INVALID_INPUT on
// `encryption_key`, and the store stays intact.
import { test } from 'node:test'
import assert from 'node:assert/strict'

import { Memory } from '../index.mjs'
import { rejectsWith, tempDir } from './helpers.mjs'

test('an encrypted store opens with its key only', async (t) => {
  const dir = tempDir(t)
  const key = Buffer.alloc(32, 7)
  let mem = await Memory.open(dir, { encryptionKey: key, durability: 'immediate' })
  await mem.shortTerm.store('secret', { text: 'sealed' })
  await mem.close()

  mem = await Memory.open(dir, { encryptionKey: new Uint8Array(key) })
  assert.deepEqual(await mem.shortTerm.retrieve('secret'), { text: 'sealed' })
  await mem.close()

  await rejectsWith(Memory.open(dir, { encryptionKey: Buffer.alloc(32, 8) }), 'INVALID_INPUT', 'encryption_key')
  await rejectsWith(Memory.open(dir), 'INVALID_INPUT', 'encryption_key')
  await rejectsWith(Memory.open(dir, { encryptionKey: Buffer.alloc(16) }), 'INVALID_INPUT', 'encryption_key')
  const e = await Memory.open(dir, { encryptionKey: Buffer.alloc(32, 8) }).catch((x) => x)
  assert.match(e.message, /wrong encryption key/)
  await rejectsWith(Memory.open(dir, { encryptionKey: 'not a buffer' }), 'INVALID_INPUT')

  mem = await Memory.open(dir, { encryptionKey: key })
  assert.deepEqual(await mem.shortTerm.retrieve('secret'), { text: 'sealed' })
  await mem.close()
})

test('rekey rotates the key in place; the old key is refused', async (t) => {
  const dir = tempDir(t)
  const oldKey = Buffer.alloc(32, 1)
  const newKey = new Uint8Array(32).fill(2)
  const mem = await Memory.open(dir, { encryptionKey: oldKey, durability: 'immediate' })
  await mem.switchContext('proj')
  await mem.shortTerm.store('secret', { text: 'sealed' })
  const id = await mem.episodic.record('rotated keys keep every episode')

  // Another handle on the store: refused, nothing changed, this one keeps working.
  const ns = await mem.namespace('other')
  await rejectsWith(mem.rekey(newKey), 'STORE_LOCKED')
  await ns.close()
  assert.deepEqual(await mem.shortTerm.retrieve('secret'), { text: 'sealed' })
  // Not a key: rejected before anything is touched.
  await rejectsWith(mem.rekey('not a buffer'), 'INVALID_INPUT', 'new_key')
  await rejectsWith(mem.rekey(Buffer.alloc(16)), 'INVALID_INPUT', 'encryption_key')

  await mem.rekey(newKey)
  // Still open, in the same context, with the new key.
  assert.equal(mem.activeContext, 'proj')
  assert.deepEqual(await mem.shortTerm.retrieve('secret'), { text: 'sealed' })
  assert.equal((await mem.episodic.get(id)).summary, 'rotated keys keep every episode')
  await mem.close()

  const e = await Memory.open(dir, { encryptionKey: oldKey }).catch((x) => x)
  assert.equal(e.code, 'INVALID_INPUT', e.message)
  assert.equal(e.field, 'encryption_key')
  assert.match(e.message, /wrong encryption key/)

  const again = await Memory.open(dir, { encryptionKey: Buffer.from(newKey) })
  await again.switchContext('proj')
  assert.deepEqual(await again.shortTerm.retrieve('secret'), { text: 'sealed' })
  const hits = await again.episodic.search('rotated')
  assert.deepEqual(hits.map((h) => h.episode.id), [id])
  await again.close()
})
