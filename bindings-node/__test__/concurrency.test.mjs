// Many concurrent Promises, two handles on one path, a worker thread on the same store.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { Worker } from 'node:worker_threads'
import { once } from 'node:events'

import { Memory } from '../index.mjs'
import { tempDir } from './helpers.mjs'

test('thousands of concurrent Promises lose nothing', async (t) => {
  const mem = await Memory.open()
  t.after(() => mem.close())
  const n = 3000
  const stored = await Promise.all(
    Array.from({ length: n }, (_, i) => mem.shortTerm.store(`k${i}`, { i })),
  )
  assert.equal(stored.length, n)
  const ids = await Promise.all(Array.from({ length: 300 }, (_, i) => mem.episodic.record(`event ${i}`)))
  assert.equal(new Set(ids).size, 300)
  const back = await Promise.all(Array.from({ length: n }, (_, i) => mem.shortTerm.retrieve(`k${i}`)))
  back.forEach((v, i) => assert.deepEqual(v, { i }))
  assert.equal((await mem.shortTerm.keys()).length, n)
  assert.equal((await mem.episodic.recent({ limit: 1000 })).length, 300)
})

test('two handles on one path share one engine', async (t) => {
  const dir = tempDir(t)
  const path = join(dir, 'shared.mem')
  const [a, b] = await Promise.all([Memory.open(path), Memory.open(path)])
  await a.semantic.store('fact', { n: 1 })
  assert.deepEqual(await b.semantic.retrieve('fact'), { n: 1 })
  const id = await b.episodic.record('seen by both')
  assert.equal((await a.episodic.get(id)).summary, 'seen by both')
  await a.close()
  // Closing one handle leaves the other (and the engine) working.
  await b.shortTerm.store('after', true)
  assert.equal(await b.shortTerm.retrieve('after'), true)
  await b.close()
})

test('a worker thread opens the same path and shares the engine', async (t) => {
  const dir = tempDir(t)
  const path = join(dir, 'worker.mem')
  const mem = await Memory.open(path)
  await mem.semantic.store('from-main', 1)
  const url = new URL('../index.js', import.meta.url).href
  const worker = new Worker(`
    const { parentPort, workerData } = require('node:worker_threads')
    const { Memory } = require(workerData.entry)
    ;(async () => {
      const mem = await Memory.open(workerData.path)
      const seen = await mem.semantic.retrieve('from-main')
      await Promise.all(Array.from({ length: 200 }, (_, i) => mem.shortTerm.store('w' + i, i)))
      const run = await (async () => {
        await mem.procedural.learn('w', [{ id: 'a', action: 'add', parameters: { n: 1 } }])
        return mem.procedural.execute('w', {}, { actions: { add: async ({ n }) => n + 1 } })
      })()
      await mem.close()
      parentPort.postMessage({ seen, status: run.status, out: run.outputs.a })
    })().catch((e) => parentPort.postMessage({ error: String(e), code: e.code }))
  `, { eval: true, workerData: { path, entry: new URL(url).pathname } })
  // Listen for 'exit' before awaiting the message: a worker that has already finished
  // delivers its last message and 'exit' in one turn, and a listener added after the
  // message would miss the exit and leave the test waiting on nothing.
  const exited = once(worker, 'exit')
  const [msg] = await once(worker, 'message')
  await exited
  assert.deepEqual(msg, { seen: 1, status: 'completed', out: 2 })
  assert.equal((await mem.shortTerm.keys({ prefix: 'w' })).length, 200)
  assert.equal(await mem.shortTerm.retrieve('w199'), 199)
  await mem.close()
})
