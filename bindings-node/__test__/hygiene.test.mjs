// Duplicates caught on write: onDuplicate per call and per context, results with
// duplicateOf (the core's hygiene suite covers the detector).
import { test } from 'node:test'
import assert from 'node:assert/strict'

import { Memory } from '../index.mjs'
import { rejectsWith } from './helpers.mjs'

const TEXT = 'Deployed version 2.4 of the billing service to staging'

test('episodic: recordDetailed and every onDuplicate policy', async (t) => {
  const mem = await Memory.open(null)
  t.after(() => mem.close())
  const ep = mem.episodic
  const first = await ep.recordDetailed(TEXT, { tags: ['deploy'], importance: 4 })
  assert.equal(first.created, true)
  assert.equal(first.duplicateOf, null)
  assert.equal(first.onDuplicate, 'keep')
  // keep in a context that never asked for another policy: no detection.
  const kept = await ep.recordDetailed(TEXT)
  assert.equal(kept.duplicateOf, null)
  await ep.forget(kept.id)
  assert.equal(await ep.record(TEXT, { onDuplicate: 'skip' }), first.id)
  const merged = await ep.recordDetailed(TEXT, { tags: ['staging'], importance: 9, onDuplicate: 'merge' })
  assert.equal(merged.created, false)
  assert.equal(merged.id, first.id)
  const got = await ep.get(first.id)
  assert.deepEqual(got.tags, ['deploy', 'staging'])
  assert.equal(got.importance, 9)
  assert.equal(got.seenCount, 2)
  assert.ok(got.lastSeen instanceof Date)
  assert.equal(got.duplicateOf, null)
  const linked = await ep.record(TEXT, { onDuplicate: 'link' })
  assert.equal((await ep.get(linked)).duplicateOf, first.id)
  await rejectsWith(ep.record(TEXT, { onDuplicate: 'drop' }), 'INVALID_INPUT', 'on_duplicate')
  // Once the context has a dedup index, keep names the duplicate too.
  const again = await ep.recordDetailed(TEXT)
  assert.equal(again.duplicateOf, first.id)
  assert.equal(again.similarity, 1)
})

test('batch items take onDuplicate', async (t) => {
  const mem = await Memory.open(null)
  t.after(() => mem.close())
  const ids = await mem.episodic.recordMany([
    { summary: TEXT, onDuplicate: 'skip' },
    { summary: TEXT + '!', onDuplicate: 'skip' },
    { summary: 'Something else entirely happened today', onDuplicate: 'skip' },
  ])
  assert.equal(ids[0], ids[1])
  assert.notEqual(ids[2], ids[0])
  assert.equal((await mem.episodic.recent(10)).length, 2)
  const v = { fact: 'The customer prefers invoices by email every month' }
  const ks = await mem.semantic.storeMany([
    { key: 'a', knowledge: v },
    { key: 'b', knowledge: v, onDuplicate: 'skip' },
  ])
  assert.equal(ks[1].key, 'a')
  assert.equal(ks[1].duplicateOf, 'a')
  await rejectsWith(
    mem.episodic.recordMany([{ summary: 'x' }, { summary: 'y', onDuplicate: 'drop' }]),
    'INVALID_INPUT',
    'items[1].on_duplicate',
  )
})

test('contexts: setOnDuplicate / onDuplicate; semantic.store with onDuplicate', async (t) => {
  const mem = await Memory.open(null)
  t.after(() => mem.close())
  assert.equal(await mem.onDuplicate(), 'keep')
  await mem.setOnDuplicate('skip', { namespace: 'work' })
  assert.equal(await mem.onDuplicate({ namespace: 'work' }), 'skip')
  const work = await mem.namespace('work')
  t.after(() => work.close())
  const a = await work.episodic.record(TEXT)
  assert.equal(await work.episodic.record(TEXT), a)
  await rejectsWith(mem.setOnDuplicate('never'), 'INVALID_INPUT', 'on_duplicate')

  const v = { fact: 'The customer prefers invoices by email every month' }
  const k1 = await mem.semantic.store('billing.invoices', v)
  assert.equal(k1.duplicateOf, null)
  const k2 = await mem.semantic.store('crm.invoices', v, { onDuplicate: 'skip' })
  assert.equal(k2.key, 'billing.invoices')
  assert.equal(k2.duplicateOf, 'billing.invoices')
  assert.equal(await mem.semantic.get('crm.invoices'), null)
  const k3 = await mem.semantic.store('crm.invoices', v, { onDuplicate: 'link' })
  assert.equal((await mem.semantic.get('crm.invoices')).duplicateOf, 'billing.invoices')
  assert.equal(k3.key, 'crm.invoices')
})
