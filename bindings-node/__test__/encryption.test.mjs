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
