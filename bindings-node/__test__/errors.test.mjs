// Errors by code, wrong JS types, panics: always a MemstrataError, never a crash.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { createRequire } from 'node:module'

import { Memory, MemstrataError } from '../index.mjs'
import { rejectsWith } from './helpers.mjs'

const native = createRequire(import.meta.url)('../index.js')

test('core errors arrive with their code, field and message', async (t) => {
  const mem = await Memory.open()
  t.after(() => mem.close())
  await rejectsWith(mem.shortTerm.store('', 1), 'INVALID_INPUT', 'key')
  await rejectsWith(mem.semantic.update('nope', { a: 1 }), 'NOT_FOUND', null)
  await rejectsWith(mem.episodic.record('x', { importance: 11 }), 'INVALID_INPUT', 'importance')
  await rejectsWith(mem.episodic.record('x', { tags: Array.from({ length: 65 }, (_, i) => `t${i}`) }), 'LIMIT_EXCEEDED', 'tags')
  await rejectsWith(mem.shortTerm.store('k', 1, { ttl: -1 }), 'INVALID_INPUT')
  await rejectsWith(mem.procedural.resume('01890000-0000-7000-8000-000000000000'), 'NOT_FOUND')
  await rejectsWith(Memory.open(null, { durability: 'sometimes' }), 'INVALID_INPUT')
  const deep = JSON.parse('['.repeat(200) + ']'.repeat(200))
  await rejectsWith(mem.shortTerm.store('deep', deep), 'LIMIT_EXCEEDED')
  const e = await mem.shortTerm.store('', 1).catch((x) => x)
  assert.match(e.message, /key/)
  assert.equal(e.name, 'MemstrataError')
  assert.ok(e.stack.includes('MemstrataError'))
})

test('wrong JS types reject with INVALID_INPUT (and never throw synchronously)', async (t) => {
  const mem = await Memory.open()
  t.after(() => mem.close())
  const cyclic = { a: 1 }
  cyclic.self = cyclic
  const cyclicArray = []
  cyclicArray.push(cyclicArray)
  const cases = [
    () => mem.shortTerm.store(1, 'number as key'),
    () => mem.shortTerm.store('k', () => 1),
    () => mem.shortTerm.store('k', { f: () => 1 }),
    () => mem.shortTerm.store('k', cyclic),
    () => mem.shortTerm.store('k', cyclicArray),
    () => mem.shortTerm.store('k', 10n),
    () => mem.shortTerm.store('k', { n: 10n }),
    () => mem.shortTerm.store('k', NaN),
    () => mem.shortTerm.store('k', [Infinity]),
    () => mem.shortTerm.store('k', undefined),
    () => mem.shortTerm.store('k', new Date()),
    () => mem.shortTerm.store('k', Symbol('s')),
    () => mem.shortTerm.store('k', new Uint8Array(2)),
    () => mem.shortTerm.store('k', Promise.resolve(1)),
    () => mem.shortTerm.store('k', 1, { ttl: 'soon' }),
    () => mem.episodic.record('x', { tags: 'not-an-array' }),
    () => mem.episodic.search(42),
    () => mem.episodic.summarize('not-an-array'),
    () => mem.procedural.learn('p', 'steps'),
    () => mem.procedural.execute('p', {}, { actions: { a: 'not a function' } }),
    () => mem.procedural.registerAction('a', 42),
    () => mem.optimize({ onProgress: 'no' }),
    () => Memory.open(42),
    () => Memory.open(null, { clock: {} }),
  ]
  for (const [i, call] of cases.entries()) {
    let p
    assert.doesNotThrow(() => { p = call() }, `case ${i} threw synchronously`)
    await rejectsWith(p, 'INVALID_INPUT')
  }
  // The store is still usable.
  await mem.shortTerm.store('k', 'fine')
  assert.equal(await mem.shortTerm.retrieve('k'), 'fine')
})

test('a Rust panic becomes INTERNAL, on the worker pool and on the JS thread', async () => {
  await rejectsWith(native._panicForTests(), 'INTERNAL')
  await rejectsWith(native._panicForTests(true), 'INTERNAL')
  const mem = await Memory.open()
  await mem.shortTerm.store('still', 'alive')
  assert.equal(await mem.shortTerm.retrieve('still'), 'alive')
  await mem.close()
})

test('MemstrataError can be constructed and caught by class', () => {
  const e = new MemstrataError('m', 'CONFLICT', null, { cause: 'c' })
  assert.equal(e.cause, 'c')
  assert.ok(e instanceof Error)
})

test('FORKED is a code of index.js and of the MemstrataErrorCode type', async () => {
  // A Node process never carries a live engine across fork() (child_process.fork
  // starts a new program), so the code is checked where it is declared: the
  // native side maps the shared ErrorCode::Forked to it (bindings-common).
  const { readFileSync } = await import('node:fs')
  const js = readFileSync(new URL('../index.js', import.meta.url), 'utf8')
  const dts = readFileSync(new URL('../index.d.ts', import.meta.url), 'utf8')
  const codes = js.match(/const CODES = new Set\(\[([^\]]*)\]/)[1].match(/'[A-Z_]+'/g)
  const union = dts.match(/export type MemstrataErrorCode =([^\n]*\n(?:\s*\|[^\n]*\n)*)/)[1].match(/'[A-Z_]+'/g)
  assert.ok(codes.includes("'FORKED'"))
  assert.deepEqual([...codes].sort(), [...union].sort())
  const e = new MemstrataError('this Memory was opened in process 1', 'FORKED')
  assert.equal(e.code, 'FORKED')
  assert.ok(e instanceof Error)
})
