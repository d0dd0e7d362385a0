// Forgetting by utility: setRetention / retention / evictions, status and optimize
// reports, and rankByUtility (the core's retention suite covers eviction itself).
import { test } from 'node:test'
import assert from 'node:assert/strict'

import { Memory } from '../index.mjs'
import { rejectsWith } from './helpers.mjs'

test('setRetention evicts the lowest utility, audits and reports', async (t) => {
  const mem = await Memory.open(null)
  t.after(() => mem.close())
  const ids = []
  for (let i = 1; i <= 6; i++) {
    ids.push(await mem.episodic.record(`observation ${i}`, { importance: i }))
  }
  await mem.setRetention({ maxEpisodes: 4, maxAge: 30 * 86400 })
  const p = await mem.retention()
  assert.equal(p.maxEpisodes, 4)
  assert.equal(p.maxBytes, null)
  assert.equal(p.maxAge, 30 * 86400)
  assert.equal(await mem.episodic.get(ids[0]), null)
  assert.notEqual(await mem.episodic.get(ids[5]), null)

  const ev = await mem.evictions({ limit: 10 })
  assert.equal(ev.length, 2)
  assert.deepEqual(new Set(ev.map((e) => e.id)), new Set(ids.slice(0, 2)))
  assert.ok(ev.every((e) => e.reason === 'max_episodes'))
  assert.ok(ev[0].evictedAt instanceof Date)

  const s = await mem.status()
  assert.equal(s.retention.length, 1)
  assert.equal(s.retention[0].context, 'default')
  assert.equal(s.retention[0].evicted, 2)
  const r = await mem.optimize()
  assert.equal(r.optimizationDetails.retention.contexts.default.evicted_total, 2)

  await mem.setRetention()
  assert.equal((await mem.retention()).maxEpisodes, null)
  await rejectsWith(mem.setRetention({ maxEpisodes: 0 }), 'INVALID_INPUT', 'max_episodes')
  await rejectsWith(mem.setRetention({ maxAge: -1 }), 'INVALID_INPUT', 'max_age')
})

test('episodic.search with rankByUtility', async (t) => {
  const mem = await Memory.open(null)
  t.after(() => mem.close())
  const old = await mem.episodic.record('release checklist', { importance: 1, timestamp: new Date('2001-01-01T00:00:00Z') })
  const fresh = await mem.episodic.record('release checklist', { importance: 9 })
  const hits = await mem.episodic.search('release checklist', { rankByUtility: true })
  assert.deepEqual(hits.map((h) => h.episode.id), [fresh, old])
  assert.ok(hits[0].score > hits[1].score)
})
