// Procedures with JS host actions: sync, async, throwing, rejecting, missing -> pause ->
// resume, actions that call back into the same Memory, engine-wide registered actions.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'

import { Memory, builtinActions } from '../index.mjs'
import { rejectsWith } from './helpers.mjs'

const TRIAGE = [
  { id: 'lookup', description: 'find the user', action: 'lookup', parameters: { user: '{{params.user}}' }, next: 'store' },
  { id: 'store', action: 'semantic.store', parameters: { key: 'triage:{{params.user}}', knowledge: '{{ steps.lookup.output }}' } },
]

test('learn, update, get, list, forget', async (t) => {
  const mem = await Memory.open()
  t.after(() => mem.close())
  const p = await mem.procedural.learn('triage', TRIAGE)
  assert.equal(p.name, 'triage')
  assert.equal(p.version, 1)
  assert.equal(p.steps.length, 2)
  assert.equal(p.steps[0].id, 'lookup')
  await rejectsWith(mem.procedural.learn('triage', TRIAGE), 'CONFLICT')
  const u = await mem.procedural.update('triage', TRIAGE.slice(0, 1).map((s) => ({ ...s, next: undefined })))
  assert.equal(u.version, 2)
  assert.equal((await mem.procedural.get('triage')).steps.length, 1)
  assert.equal(await mem.procedural.get('nope'), null)
  await rejectsWith(mem.procedural.update('nope', TRIAGE), 'NOT_FOUND')
  await rejectsWith(mem.procedural.learn('bad', [{ id: 'a', action: 'x', next: 'missing' }]), 'INVALID_INPUT')
  assert.deepEqual(await mem.procedural.list(), ['triage'])
  assert.equal(await mem.procedural.forget('triage'), true)
  assert.deepEqual(await mem.procedural.list(), [])
})

test('sync and async host actions receive resolved parameters; outputs flow on', async (t) => {
  const mem = await Memory.open()
  t.after(() => mem.close())
  await mem.procedural.learn('triage', TRIAGE)
  const seen = []
  const run = await mem.procedural.execute('triage', { user: 'bob' }, {
    actions: { lookup: (params) => { seen.push(params); return { severity: 5 } } },
  })
  assert.equal(run.status, 'completed')
  assert.deepEqual(seen, [{ user: 'bob' }])
  assert.deepEqual(run.outputs.lookup, { severity: 5 })
  assert.deepEqual(await mem.semantic.retrieve('triage:bob'), { severity: 5 })
  assert.deepEqual(run.params, { user: 'bob' })
  assert.equal(run.trace.length, 2)
  assert.ok(run.finishedAt instanceof Date)

  const run2 = await mem.procedural.execute('triage', { user: 'eve' }, {
    actions: { lookup: async (params) => { await sleep(5); return { severity: params.user.length } } },
  })
  assert.equal(run2.status, 'completed')
  assert.deepEqual(await mem.semantic.retrieve('triage:eve'), { severity: 3 })
  assert.deepEqual(await mem.procedural.run(run2.runId), run2)
  assert.equal(await mem.procedural.run('01890000-0000-7000-8000-000000000000'), null)
})

test('a throw or a rejection fails the step with its message; the store is unaffected', async (t) => {
  const mem = await Memory.open()
  t.after(() => mem.close())
  await mem.procedural.learn('triage', TRIAGE)
  const thrown = await mem.procedural.execute('triage', { user: 'bob' }, {
    actions: { lookup: () => { throw new TypeError('no such user') } },
  })
  assert.equal(thrown.status, 'failed')
  assert.match(thrown.error, /no such user/)
  assert.match(thrown.trace[0].error, /no such user/)
  const rejected = await mem.procedural.execute('triage', { user: 'bob' }, {
    actions: { lookup: async () => { throw new Error('service down') } },
  })
  assert.equal(rejected.status, 'failed')
  assert.match(rejected.error, /service down/)
  const bad = await mem.procedural.execute('triage', { user: 'bob' }, {
    actions: { lookup: () => ({ when: new Date() }) },
  })
  assert.equal(bad.status, 'failed')
  assert.match(bad.error, /Date/)
  assert.equal(await mem.semantic.retrieve('triage:bob'), null)
})

test('a missing action pauses the run; resume continues it (with or without actions)', async (t) => {
  const mem = await Memory.open()
  t.after(() => mem.close())
  await mem.procedural.learn('triage', TRIAGE)
  const paused = await mem.procedural.execute('triage', { user: 'bob' })
  assert.equal(paused.status, 'awaiting_action')
  assert.deepEqual(paused.pending, { step: 'lookup', description: 'find the user', action: 'lookup', parameters: { user: 'bob' } })
  const done = await mem.procedural.resume(paused.runId, { severity: 9 })
  assert.equal(done.status, 'completed')
  assert.deepEqual(await mem.semantic.retrieve('triage:bob'), { severity: 9 })
  await rejectsWith(mem.procedural.resume(paused.runId, 1), 'CONFLICT')

  await mem.procedural.learn('two', [
    { id: 'a', action: 'ask_human', next: 'b' },
    { id: 'b', action: 'double', parameters: { n: '{{ last }}' } },
  ])
  const p2 = await mem.procedural.execute('two')
  assert.equal(p2.pending.action, 'ask_human')
  const r2 = await mem.procedural.resume(p2.runId, 21, { actions: { double: ({ n }) => n * 2 } })
  assert.equal(r2.status, 'completed')
  assert.equal(r2.outputs.b, 42)
})

test('an action that calls back into the same Memory does not deadlock, even many at once', async (t) => {
  const mem = await Memory.open()
  t.after(() => mem.close())
  await mem.procedural.learn('note', [{ id: 'a', action: 'note', parameters: { i: '{{params.i}}' } }])
  const note = async ({ i }) => {
    await mem.semantic.store(`note:${i}`, { i })
    const back = await mem.semantic.retrieve(`note:${i}`)
    await mem.episodic.record(`noted ${i}`)
    return back
  }
  const runs = await Promise.all(
    Array.from({ length: 24 }, (_, i) => mem.procedural.execute('note', { i }, { actions: { note } })),
  )
  for (const [i, r] of runs.entries()) {
    assert.equal(r.status, 'completed', r.error ?? '')
    assert.deepEqual(r.outputs.a, { i })
  }
  assert.equal((await mem.semantic.keys({ prefix: 'note:' })).length, 24)
})

test('registerAction: engine-wide, shared by namespaces, per-call actions win; built-ins refused', async (t) => {
  const mem = await Memory.open()
  t.after(() => mem.close())
  await mem.procedural.registerAction('lookup', (p) => ({ from: 'registered', user: p.user }))
  assert.deepEqual(await mem.procedural.registeredActions(), ['lookup'])
  const ns = await mem.namespace('other')
  await ns.procedural.learn('triage', TRIAGE)
  const r = await ns.procedural.execute('triage', { user: 'bob' })
  assert.equal(r.status, 'completed')
  assert.deepEqual(r.outputs.lookup, { from: 'registered', user: 'bob' })
  const own = await ns.procedural.execute('triage', { user: 'bob' }, { actions: { lookup: () => 'per-call' } })
  assert.equal(own.outputs.lookup, 'per-call')
  await rejectsWith(mem.procedural.registerAction(builtinActions()[0], () => 1), 'INVALID_INPUT')
  assert.equal(await mem.procedural.unregisterAction('lookup'), true)
  assert.equal(await mem.procedural.unregisterAction('lookup'), false)
  assert.equal((await ns.procedural.execute('triage', { user: 'bob' })).status, 'awaiting_action')
})
