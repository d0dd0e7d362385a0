// Batch writes (recordMany, storeMany) and the memory budgets from Node.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { join } from 'node:path'

import { Memory } from '../index.mjs'
import { rejectsWith, tempDir } from './helpers.mjs'

test('episodic.recordMany: ids in order, per-item options, searchable', async (t) => {
  const mem = await Memory.open(null)
  t.after(() => mem.close())
  const when = new Date('2025-03-04T05:06:07Z')
  const items = Array.from({ length: 50 }, (_, i) => ({ summary: `chat turn ${i} about kayaks`, tags: ['chat'] }))
  items[7] = { summary: 'the special one', content: { pr: 42 }, participants: ['alice'], tags: ['chat'], importance: 9, timestamp: when }
  const ids = await mem.episodic.recordMany(items)
  assert.equal(ids.length, 50)
  const ep = await mem.episodic.get(ids[7])
  assert.deepEqual([ep.summary, ep.content, ep.participants, ep.importance, ep.timestamp.toISOString()],
    ['the special one', { pr: 42 }, ['alice'], 9, when.toISOString()])
  assert.equal((await mem.episodic.get(ids[3])).summary, 'chat turn 3 about kayaks')
  assert.equal((await mem.episodic.search('', { tags: ['chat'], limit: 100 })).length, 50)
  assert.equal((await mem.episodic.search('special'))[0].episode.id, ids[7])
  assert.deepEqual(await mem.episodic.recordMany([]), [])
})

test('episodic.recordMany: a bad item rejects the batch, naming index and field', async (t) => {
  const mem = await Memory.open(null)
  t.after(() => mem.close())
  await mem.episodic.record('kept')
  const items = Array.from({ length: 6 }, (_, i) => ({ summary: `poisoned ${i}` }))
  items[3] = { summary: 'bad', importance: 11 }
  await rejectsWith(mem.episodic.recordMany(items), 'INVALID_INPUT', 'items[3].importance')
  items[3] = { summary: 'bad', content: 'x'.repeat(17 * 1024 * 1024) }
  await rejectsWith(mem.episodic.recordMany(items), 'LIMIT_EXCEEDED', 'items[3].content')
  items[3] = { summary: ' ' }
  await rejectsWith(mem.episodic.recordMany(items), 'INVALID_INPUT', 'items[3].summary')
  await rejectsWith(mem.episodic.recordMany(Array(10001).fill({ summary: 'x' })), 'LIMIT_EXCEEDED', 'items')
  assert.deepEqual((await mem.episodic.recent()).map((e) => e.summary), ['kept'])
  assert.deepEqual(await mem.episodic.search('poisoned'), [])
})

test('semantic.storeMany: versions in order, atomic rejection', async (t) => {
  const mem = await Memory.open(null)
  t.after(() => mem.close())
  const got = await mem.semantic.storeMany([
    { key: 'user:ann', knowledge: { role: 'dev' } },
    { key: 'user:bob', knowledge: { city: 'Lyon' }, embedding: [1, 0.5] },
    { key: 'user:ann', knowledge: { role: 'lead' } },
  ])
  assert.deepEqual(got.map((k) => [k.key, k.version]), [['user:ann', 1], ['user:bob', 1], ['user:ann', 2]])
  assert.deepEqual(await mem.semantic.retrieve('user:ann'), { role: 'lead' })
  assert.equal((await mem.semantic.query('Lyon'))[0].key, 'user:bob')
  await rejectsWith(mem.semantic.storeMany([{ key: 'a', knowledge: 1 }, { key: '', knowledge: 2 }]),
    'INVALID_INPUT', 'items[1].key')
  await rejectsWith(mem.semantic.storeMany([{ key: 'c', knowledge: 1, embedding: [1, 2, 3] }]),
    'INVALID_INPUT', 'items[0].embedding')
  assert.deepEqual(await mem.semantic.keys(), ['user:ann', 'user:bob'])
})

test('memory budgets: lowMemory preset, cache budgets, validation', async (t) => {
  const dir = tempDir(t)
  const a = await Memory.open(join(dir, 'a'), { lowMemory: true, episodeCacheBytes: 0 })
  await a.episodic.recordMany([{ summary: 'small footprint' }])
  assert.equal((await a.episodic.search('footprint')).length, 1)
  await a.close()
  await rejectsWith(Memory.open(join(dir, 'b'), { episodeCacheBytes: 2 ** 31 }), 'INVALID_INPUT', 'episode_cache_bytes')
  await rejectsWith(Memory.open(join(dir, 'c'), { shortTermCacheBytes: -1 }), 'INVALID_INPUT', 'short_term_cache_bytes')
  const d = await Memory.open(join(dir, 'd'), { lowMemory: true, indexCacheBytes: 0, releaseMemoryInterval: 0 })
  await d.episodic.recordMany([{ summary: 'no heap release' }])
  assert.equal((await d.episodic.search('heap')).length, 1)
  await d.close()
  const e = await Memory.open(join(dir, 'e'), {
    encryptionKey: Buffer.alloc(32, 7), indexCacheBytes: 2 ** 20, releaseMemoryInterval: 0.5,
  })
  await e.episodic.recordMany([{ summary: 'encrypted index' }])
  assert.equal((await e.episodic.search('encrypted')).length, 1)
  await e.close()
  await rejectsWith(Memory.open(join(dir, 'f'), { lowMemory: true, indexCacheBytes: 2 ** 31 }), 'INVALID_INPUT', 'index_cache_bytes')
  await rejectsWith(Memory.open(join(dir, 'g'), { indexCacheBytes: -1 }), 'INVALID_INPUT', 'index_cache_bytes')
  await rejectsWith(Memory.open(join(dir, 'h'), { releaseMemoryInterval: -1 }), 'INVALID_INPUT', 'release_memory_interval')
})
