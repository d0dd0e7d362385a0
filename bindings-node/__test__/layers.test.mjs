// The five layers, method by method (the Python binding's tests/test_*.py, in JS).
import { test } from 'node:test'
import assert from 'node:assert/strict'

import { ManualClock, Memory } from '../index.mjs'

test('shortTerm: store, retrieve, entry, forget, keys, TTL on a manual clock', async (t) => {
  const clock = new ManualClock(new Date('2031-06-01T10:00:00Z'))
  const mem = await Memory.open(null, { clock })
  t.after(() => mem.close())
  const st = mem.shortTerm
  const e = await st.store('draft', { text: 'hello', n: [1, 2.5, null, true] }, { ttl: 300 })
  assert.equal(e.key, 'draft')
  assert.deepEqual(e.value, { text: 'hello', n: [1, 2.5, null, true] })
  assert.ok(e.storedAt instanceof Date)
  assert.equal(e.storedAt.toISOString(), '2031-06-01T10:00:00.000Z')
  assert.equal(e.expiresAt.toISOString(), '2031-06-01T10:05:00.000Z')
  assert.deepEqual(await st.retrieve('draft'), { text: 'hello', n: [1, 2.5, null, true] })
  const plain = await st.store('plain', 'v')
  assert.equal(plain.expiresAt, null)
  await st.store('other', 0)
  assert.deepEqual(await st.keys(), ['draft', 'other', 'plain'])
  assert.deepEqual(await st.keys({ prefix: 'p' }), ['plain'])
  assert.equal((await st.entry('plain')).value, 'v')
  clock.advance(301)
  assert.equal(await st.retrieve('draft'), null)
  assert.equal(await st.entry('draft'), null)
  assert.equal(await st.forget('plain'), true)
  assert.equal(await st.forget('plain'), false)
  assert.equal(await st.retrieve('missing'), null)
  // Stored values come back as they went in (a falsy value is not absent).
  assert.equal(await st.retrieve('other'), 0)
})

test('working: focus, workspace, clear', async (t) => {
  const mem = await Memory.open(null, { focusCapacity: 2, workspaceCapacity: 3 })
  t.after(() => mem.close())
  const w = mem.working
  assert.equal(await w.focus('a'), true)
  await w.focus('b')
  await w.focus('c')
  assert.deepEqual(await w.currentFocus(), ['b', 'c'])
  const id = await w.addToWorkspace({ note: 1 })
  assert.equal(typeof id, 'string')
  await w.addToWorkspace('two')
  assert.deepEqual(await w.workspace(), [{ note: 1 }, 'two'])
  const items = await w.workspaceItems()
  assert.equal(items[0].id, id)
  assert.ok(items[0].addedAt instanceof Date)
  await w.clear()
  assert.deepEqual(await w.currentFocus(), [])
  assert.deepEqual(await w.workspace(), [])
})

test('episodic: record, get, search with filters, recent, summarize, forget', async (t) => {
  const mem = await Memory.open()
  t.after(() => mem.close())
  const ep = mem.episodic
  const id1 = await ep.record('Deployed v2 to staging', {
    content: { pr: 42 }, participants: ['alice'], tags: ['deploy'], importance: 7,
    timestamp: new Date('2020-01-01T00:00:00Z'),
  })
  const id2 = await ep.record('Fixed the login bug', { participants: ['bob'], tags: ['bugfix'] })
  const e = await ep.get(id1)
  assert.equal(e.summary, 'Deployed v2 to staging')
  assert.deepEqual(e.content, { pr: 42 })
  assert.deepEqual(e.participants, ['alice'])
  assert.equal(e.importance, 7)
  assert.equal(e.timestamp.toISOString(), '2020-01-01T00:00:00.000Z')
  assert.equal((await ep.get(id2)).content, null)
  assert.equal(await ep.get('01890000-0000-7000-8000-000000000000'), null)

  const hits = await ep.search('staging deploy', { limit: 10 })
  assert.equal(hits[0].episode.id, id1)
  assert.equal(typeof hits[0].score, 'number')
  assert.deepEqual((await ep.search('', { tags: ['bugfix'] })).map((h) => h.episode.id), [id2])
  assert.deepEqual((await ep.search(undefined, { participants: ['alice'] })).map((h) => h.episode.id), [id1])
  assert.deepEqual((await ep.search('', { minImportance: 6 })).map((h) => h.episode.id), [id1])
  assert.deepEqual((await ep.search('', { since: new Date('2021-01-01T00:00:00Z') })).map((h) => h.episode.id), [id2])
  assert.deepEqual((await ep.search('', { until: new Date('2021-01-01T00:00:00Z') })).map((h) => h.episode.id), [id1])

  const recent = await ep.recent({ limit: 1 })
  assert.equal(recent.length, 1)
  assert.equal((await ep.recent()).length, 2)
  const summary = await ep.summarize([id1, id2])
  assert.match(summary, /Deployed v2 to staging/)
  assert.match(summary, /Fixed the login bug/)
  assert.equal(await ep.forget(id2), true)
  assert.equal(await ep.forget(id2), false)
  assert.equal((await ep.search('login')).length, 0)
})

test('semantic: store, retrieve, get, query, merge-patch update, history, keys, forget', async (t) => {
  const mem = await Memory.open()
  t.after(() => mem.close())
  const s = mem.semantic
  const k = await s.store('user:alice', { role: 'admin', team: 'core' })
  assert.equal(k.version, 1)
  assert.ok(k.createdAt instanceof Date)
  const u = await s.update('user:alice', { team: 'infra', role: null })
  assert.equal(u.version, 2)
  assert.deepEqual(u.knowledge, { team: 'infra' })
  assert.deepEqual(await s.retrieve('user:alice'), { team: 'infra' })
  assert.equal((await s.get('user:alice')).version, 2)
  assert.equal(await s.get('user:nobody'), null)
  assert.equal(await s.retrieve('user:nobody'), null)
  const history = await s.history('user:alice')
  assert.deepEqual(history.map((v) => v.version), [1, 2])
  assert.deepEqual(history[0].knowledge, { role: 'admin', team: 'core' })
  await s.store('project:x', 'a database migration tool')
  const hits = await s.query('migration', { limit: 5 })
  assert.equal(hits[0].key, 'project:x')
  assert.equal(typeof hits[0].score, 'number')
  assert.deepEqual(await s.keys(), ['project:x', 'user:alice'])
  assert.deepEqual(await s.keys({ prefix: 'user:' }), ['user:alice'])
  assert.equal(await s.forget('project:x'), true)
  assert.equal(await s.forget('project:x'), false)
})

test('JSON values round-trip: nesting, unicode, big integers within 2^53, negative zero as a float', async (t) => {
  const mem = await Memory.open()
  t.after(() => mem.close())
  const value = {
    nested: { a: [{ b: [[[]]] }], empty: {} },
    text: 'zürich ✓ 日本',
    big: 9007199254740991,
    neg: -5000000000,
    frac: 0.1,
    bool: false,
    nil: null,
  }
  await mem.shortTerm.store('v', value)
  assert.deepEqual(await mem.shortTerm.retrieve('v'), value)
  // An undefined property is skipped, as JSON.stringify does.
  await mem.shortTerm.store('u', { a: 1, b: undefined })
  assert.deepEqual(await mem.shortTerm.retrieve('u'), { a: 1 })
})
