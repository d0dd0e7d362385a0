// Facts with validity and as-of reads: validFrom / validUntil on store, update and
// storeMany items, asOf on get / retrieve / query / search / recent, includeExpired
// on query (the core's validity suite covers the semantics).
import { test } from 'node:test'
import assert from 'node:assert/strict'

import { ManualClock, Memory } from '../index.mjs'
import { rejectsWith } from './helpers.mjs'

const T0 = new Date('2031-06-01T10:00:00Z')
const at = (s) => new Date(T0.getTime() + s * 1000)

test('semantic: supersession, asOf reads, expiry and includeExpired', async (t) => {
  const clock = new ManualClock(T0)
  const mem = await Memory.open(null, { clock })
  t.after(() => mem.close())
  const s = mem.semantic
  const k1 = await s.store('ceo', { name: 'Ada' })
  assert.deepEqual(k1.validFrom, T0)
  assert.equal(k1.validUntil, null)
  clock.advance(60)
  const k2 = await s.update('ceo', { name: 'Grace' })
  assert.deepEqual(k2.validFrom, at(60))
  const h = await s.history('ceo')
  assert.deepEqual(h[0].validUntil, at(60))
  assert.deepEqual(await s.retrieve('ceo', { asOf: at(30) }), { name: 'Ada' })
  assert.equal((await s.get('ceo', { asOf: at(30) })).version, 1)
  assert.equal(await s.get('ceo', { asOf: at(-1) }), null)
  const hits = await s.query('Grace', { asOf: at(30) })
  assert.deepEqual(hits.map((x) => x.knowledge), [{ name: 'Ada' }])
  assert.deepEqual(hits[0].validUntil, at(60))

  await s.store('promo', { text: 'spring discount' }, { validUntil: at(3600) })
  assert.equal((await s.query('discount')).length, 1)
  clock.advance(3600)
  assert.equal((await s.query('discount')).length, 0)
  assert.equal((await s.query('discount', { includeExpired: true })).length, 1)
  await rejectsWith(s.store('bad', 1, { validFrom: at(0), validUntil: at(0) }), 'INVALID_INPUT', 'valid_until')
  await rejectsWith(s.update('ceo', {}, { validUntil: at(0) }), 'INVALID_INPUT', 'valid_until')
  const out = await s.storeMany([{ key: 'a', knowledge: 1, validFrom: at(10) }])
  assert.deepEqual(out[0].validFrom, at(10))
})

test('episodic: recordedAt and asOf on search and recent', async (t) => {
  const clock = new ManualClock(T0)
  const mem = await Memory.open(null, { clock })
  t.after(() => mem.close())
  const ep = mem.episodic
  const a = await ep.record('billing deploy')
  clock.advance(60)
  const b = await ep.record('billing outage', { timestamp: at(-86400) })
  assert.deepEqual((await ep.get(b)).recordedAt, at(60))
  assert.deepEqual((await ep.search('billing', { asOf: at(30) })).map((h) => h.episode.id), [a])
  assert.equal((await ep.search('billing')).length, 2)
  assert.deepEqual((await ep.recent({ asOf: at(30) })).map((e) => e.id), [a])
})
