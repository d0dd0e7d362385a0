// Memory-level methods: contexts, sessions, context values, timesheet, status,
// optimize and import progress, export/import, lifecycle and constants.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'

import * as memstrata from '../index.mjs'
import { ManualClock, Memory } from '../index.mjs'
import { rejectsWith, tempDir } from './helpers.mjs'

test('contexts: namespace, switchContext, activeContext, contexts', async (t) => {
  const mem = await Memory.open()
  t.after(() => mem.close())
  assert.equal(mem.activeContext, 'default')
  const proj = await mem.namespace('proj')
  assert.equal(proj.activeContext, 'proj')
  await proj.shortTerm.store('k', 'in proj')
  assert.equal(await mem.shortTerm.retrieve('k'), null)
  await mem.working.focus('thinking')
  const r = await mem.switchContext('proj')
  assert.deepEqual(r, { success: true, previousContext: 'default', contextLoaded: true })
  assert.equal(mem.activeContext, 'proj')
  // Layer objects follow the handle's active context.
  assert.equal(await mem.shortTerm.retrieve('k'), 'in proj')
  await mem.switchContext('default', { preserveCurrent: true })
  assert.deepEqual(await mem.working.currentFocus(), ['thinking'])
  await mem.switchContext('other')
  await mem.switchContext('default', { preserveCurrent: false })
  assert.deepEqual(await mem.contexts(), ['default', 'proj'])
})

test('sessions: create, save with compression levels, restore versions, list, delete', async (t) => {
  const mem = await Memory.open()
  t.after(() => mem.close())
  const s = await mem.sessionCreate('refactor', { metadata: { repo: 'x' } })
  assert.equal(typeof s.sessionId, 'string')
  assert.ok(s.createdAt instanceof Date)
  const v1 = await mem.sessionSave(s.sessionId, { step: 1 })
  assert.deepEqual([v1.success, v1.version], [true, 1])
  const v2 = await mem.sessionSave(s.sessionId, { step: 2, notes: 'x'.repeat(500) }, { compressionLevel: 3 })
  assert.equal(v2.version, 2)
  const latest = await mem.sessionRestore(s.sessionId)
  assert.deepEqual(latest.content, { step: 2, notes: 'x'.repeat(500) })
  assert.deepEqual(latest.metadata, { repo: 'x' })
  assert.equal(latest.version, 2)
  assert.deepEqual((await mem.sessionRestore(s.sessionId, { version: 1 })).content, { step: 1 })
  const list = await mem.sessionList()
  assert.equal(list.length, 1)
  assert.deepEqual([list[0].name, list[0].latestVersion, list[0].versionCount], ['refactor', 2, 2])
  const versions = await mem.sessionVersions(s.sessionId)
  assert.deepEqual(versions.map((v) => v.compressionLevel), [1, 3])
  assert.ok(versions[1].rawBytes > 0 && versions[1].storedBytes > 0)
  const plain = await mem.sessionCreate('no-metadata')
  assert.deepEqual((await mem.sessionList()).find((x) => x.sessionId === plain.sessionId).metadata, {})
  assert.equal((await mem.sessionList()).find((x) => x.sessionId === plain.sessionId).latestVersion, null)
  assert.equal(await mem.sessionDelete(s.sessionId), true)
  assert.equal(await mem.sessionDelete(s.sessionId), false)
  await rejectsWith(mem.sessionRestore(s.sessionId), 'NOT_FOUND')
  await rejectsWith(mem.sessionSave(plain.sessionId, 1, { compressionLevel: 9 }), 'INVALID_INPUT', 'compression_level')
})

test('contextStore / contextRetrieve, in the active context or a named one', async (t) => {
  const clock = new ManualClock(new Date('2031-06-01T10:00:00Z'))
  const mem = await Memory.open(null, { clock })
  t.after(() => mem.close())
  const stored = await mem.contextStore('goal', { ship: 'v2' }, { ttl: 60, namespace: 'proj' })
  assert.equal(stored.success, true)
  assert.equal(stored.expiresAt.toISOString(), '2031-06-01T10:01:00.000Z')
  assert.equal(await mem.contextRetrieve('goal'), null)
  const v = await mem.contextRetrieve('goal', { namespace: 'proj' })
  assert.deepEqual(v.value, { ship: 'v2' })
  assert.equal(v.storedAt.toISOString(), '2031-06-01T10:00:00.000Z')
  assert.equal((await mem.contextStore('here', 1)).expiresAt, null)
  assert.equal((await mem.contextRetrieve('here')).value, 1)
  clock.advance(61)
  assert.equal(await mem.contextRetrieve('goal', { namespace: 'proj' }), null)
})

test('timesheet: punchIn, punchOut, task, tasks, timesheetReport', async (t) => {
  const clock = new ManualClock(new Date('2031-06-01T10:00:00Z'))
  const mem = await Memory.open(null, { clock })
  t.after(() => mem.close())
  const a = await mem.punchIn('claude', 'refactor the parser')
  assert.equal(a.startTime.toISOString(), '2031-06-01T10:00:00.000Z')
  const b = await mem.punchIn('gpt', 'write docs', { context: 'docs' })
  clock.advance(90)
  const out = await mem.punchOut(a.taskId, 'parser refactored')
  assert.equal(out.durationSeconds, 90)
  assert.deepEqual(out.files, [])
  await rejectsWith(mem.punchOut(a.taskId, 'again'), 'CONFLICT')
  await rejectsWith(mem.punchOut('01890000-0000-7000-8000-000000000000', 'x'), 'NOT_FOUND')
  const task = await mem.task(a.taskId)
  assert.deepEqual([task.status, task.summary, task.llmName], ['closed', 'parser refactored', 'claude'])
  assert.equal((await mem.task(b.taskId)).endTime, null)
  assert.equal(await mem.task('01890000-0000-7000-8000-000000000000'), null)
  assert.deepEqual((await mem.tasks({ status: 'open' })).map((x) => x.taskId), [b.taskId])
  assert.deepEqual((await mem.tasks({ llmName: 'claude' })).map((x) => x.taskId), [a.taskId])
  assert.deepEqual((await mem.tasks({ context: 'docs' })).map((x) => x.taskId), [b.taskId])
  assert.equal((await mem.tasks({ limit: 1 })).length, 1)
  assert.equal((await mem.tasks()).length, 2)
  const report = await mem.timesheetReport({ since: new Date('2031-01-01T00:00:00Z') })
  assert.equal(report.tasks, 2)
  assert.equal(report.until, null)
  const claude = report.llms.find((l) => l.llmName === 'claude')
  assert.deepEqual([claude.tasks, claude.openTasks, claude.totalSeconds], [1, 0, 90])
  await rejectsWith(mem.tasks({ status: 'sometimes' }), 'INVALID_INPUT')
})

test('status and optimize, with progress reports', async (t) => {
  const mem = await Memory.open()
  t.after(() => mem.close())
  const s = await mem.status()
  assert.equal(s.status, 'healthy')
  assert.equal(typeof s.version, 'string')
  assert.deepEqual(s.activeSessions, [])
  assert.equal(s.sessionCount, 0)
  assert.equal(s.metrics, null)
  const bare = await mem.status({ includeSessions: false })
  assert.deepEqual([bare.activeSessions, bare.sessionCount], [null, null])
  const created = await mem.sessionCreate('s')
  const withSession = await mem.status()
  assert.equal(withSession.sessionCount, 1)
  assert.deepEqual(withSession.activeSessions, [
    { sessionId: created.sessionId, name: 's', createdAt: created.createdAt },
  ])
  await mem.shortTerm.store('k', 1)
  const m = await mem.status({ includeMetrics: true })
  assert.ok(m.metrics.items.shortTerm >= 1)
  assert.ok(m.metrics.operations['short_term.store'].count >= 1)

  const events = []
  const report = await mem.optimize({ level: 'aggressive', onProgress: (p) => events.push(p) })
  assert.equal(report.success, true)
  assert.equal(typeof report.bytesSaved, 'number')
  assert.equal(report.optimizationDetails.level, 'aggressive')
  const stages = [...new Set(events.map((e) => e.stage))]
  assert.deepEqual(stages, ['sweep', 'prune_sessions', 'merge_index', 'flush'])
  for (const e of events) {
    assert.equal(typeof e.done, 'number')
    assert.ok(e.total === null || typeof e.total === 'number')
  }
  assert.equal((await mem.optimize()).optimizationDetails.level, 'light')
  // A throwing progress callback does not fail the operation.
  const r = await mem.optimize({ onProgress: () => { throw new Error('ignored') } })
  assert.equal(r.success, true)
  await rejectsWith(mem.optimize({ level: 'extreme' }), 'INVALID_INPUT')
})

test('export, import with progress, importKnowledgeGraph', async (t) => {
  const dir = tempDir(t)
  const a = await Memory.open(join(dir, 'a.mem'))
  await a.semantic.store('user:alice', { role: 'admin' })
  for (let i = 0; i < 100; i++) await a.episodic.record(`episode ${i}`)
  const file = join(dir, 'backup.jsonl')
  const out = await a.export(file)
  assert.ok(out.records >= 101)
  assert.equal(out.counts.episode, 100)

  const b = await Memory.open()
  t.after(() => b.close())
  const events = []
  const back = await b.import(file, { onProgress: (p) => events.push(p) })
  assert.equal(back.records, out.records)
  assert.deepEqual(await b.semantic.retrieve('user:alice'), { role: 'admin' })
  assert.deepEqual([...new Set(events.map((e) => e.stage))], ['validate', 'apply'])
  const last = events.at(-1)
  assert.equal(last.done, last.total)

  const graph = join(dir, 'memory.jsonl')
  writeFileSync(graph, [
    JSON.stringify({ type: 'entity', name: 'Alice', entityType: 'person', observations: ['likes tea'] }),
    JSON.stringify({ type: 'relation', from: 'Alice', to: 'Bob', relationType: 'knows' }),
  ].join('\n') + '\n')
  const kg = await b.importKnowledgeGraph(graph)
  assert.ok(kg.records >= 1)
  await rejectsWith(b.import(join(dir, 'missing.jsonl')), 'IO')
  await rejectsWith(b.export(join(dir, 'no', 'such', 'dir.jsonl')), 'IO')
  await a.close()
})

test('lifecycle: path, isTemporary, flush, close, closed, CLOSED afterwards', async (t) => {
  const dir = tempDir(t)
  const mem = await Memory.open(join(dir, 'store'), { durability: 'manual' })
  assert.equal(mem.isTemporary, false)
  assert.ok(mem.path.endsWith('store'))
  await mem.shortTerm.store('k', 1)
  await mem.flush()
  const st = mem.shortTerm
  assert.equal(mem.closed, false)
  await mem.close()
  assert.equal(mem.closed, true)
  await mem.close()
  await rejectsWith(st.retrieve('k'), 'CLOSED')
  await rejectsWith(mem.status(), 'CLOSED')
  assert.throws(() => mem.path, (e) => e instanceof memstrata.MemstrataError && e.code === 'CLOSED')
  const again = await Memory.open(join(dir, 'store'))
  assert.equal(await again.shortTerm.retrieve('k'), 1)
  await again.close()
  const temp = await Memory.open()
  assert.equal(temp.isTemporary, true)
  await temp.close()
})

test('module constants mirror the core', () => {
  assert.equal(memstrata.DEFAULT_CONTEXT, 'default')
  assert.equal(typeof memstrata.FORMAT_VERSION, 'number')
  assert.equal(typeof memstrata.EXPORT_FORMAT_VERSION, 'number')
  assert.equal(memstrata.MAX_COMPRESSION_LEVEL, 3)
  assert.equal(memstrata.SUMMARY_MAX_CHARS, 4000)
  assert.ok(memstrata.builtinActions().includes('store_knowledge') || memstrata.builtinActions().length > 0)
  assert.equal(memstrata.coreVersion(), '0.1.0')
})
