// Other processes: STORE_LOCKED while another process holds the store, and a SIGKILL
// during durability "immediate" writes losing nothing that was acknowledged.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { join } from 'node:path'
import { createInterface } from 'node:readline'

import { Memory } from '../index.mjs'
import { rejectsWith, tempDir } from './helpers.mjs'

const entry = new URL('../index.js', import.meta.url).pathname

/** A child Node process running `code` with `path` as argv[2]; its stdout as lines. */
function child(code, path) {
  const proc = spawn(process.execPath, ['-e', code, entry, path], { stdio: ['ignore', 'pipe', 'inherit'] })
  const lines = createInterface({ input: proc.stdout })
  return { proc, lines }
}

async function firstLine(lines, predicate) {
  for await (const line of lines) if (predicate(line)) return line
  throw new Error('child ended without the expected line')
}

test('another process holding the store gets STORE_LOCKED', async (t) => {
  const dir = tempDir(t)
  const path = join(dir, 'locked.mem')
  const { proc, lines } = child(`
    const { Memory } = require(process.argv[1])
    Memory.open(process.argv[2]).then(() => { console.log('open'); setInterval(() => {}, 1000) })
  `, path)
  await firstLine(lines, (l) => l === 'open')
  try {
    await rejectsWith(Memory.open(path), 'STORE_LOCKED')
  } finally {
    proc.kill('SIGKILL')
    await new Promise((resolve) => proc.once('exit', resolve))
  }
})

test('SIGKILL during durability "immediate" writes loses nothing acknowledged', async (t) => {
  const dir = tempDir(t)
  const path = join(dir, 'crash.mem')
  const { proc, lines } = child(`
    const { Memory } = require(process.argv[1])
    ;(async () => {
      const mem = await Memory.open(process.argv[2], { durability: 'immediate' })
      for (let i = 0; ; i++) {
        await mem.shortTerm.store('k' + i, { i })
        if (i % 3 === 0) await mem.episodic.record('event ' + i)
        console.log('ack ' + i)
      }
    })()
  `, path)
  const acked = []
  for await (const line of lines) {
    if (line.startsWith('ack ')) acked.push(Number(line.slice(4)))
    if (acked.length === 150) {
      proc.kill('SIGKILL')
      break
    }
  }
  await new Promise((resolve) => (proc.exitCode !== null || proc.signalCode !== null ? resolve() : proc.once('exit', resolve)))
  assert.equal(proc.signalCode, 'SIGKILL')
  const mem = await Memory.open(path)
  for (const i of acked) assert.deepEqual(await mem.shortTerm.retrieve(`k${i}`), { i }, `k${i} was acknowledged`)
  const episodes = await mem.episodic.search('', { limit: 1000 })
  const recorded = new Set(episodes.map((h) => h.episode.summary))
  for (const i of acked.filter((i) => i % 3 === 0)) assert.ok(recorded.has(`event ${i}`), `event ${i}`)
  await mem.close()
})

test('child_process.fork starts a new process: it opens its own store and gets STORE_LOCKED while the parent holds it', async (t) => {
  const { fork } = await import('node:child_process')
  const dir = tempDir(t)
  const path = join(dir, 'forked.mem')
  const mem = await Memory.open(path)
  await mem.shortTerm.store('parent', 1)
  const script = join(dir, 'child.cjs')
  const { writeFileSync } = await import('node:fs')
  writeFileSync(script, `
    const { Memory } = require(${JSON.stringify(entry)})
    Memory.open(process.argv[2]).then(
      (m) => m.close().then(() => process.send({ opened: true })),
      (e) => process.send({ code: e.code }),
    )
  `)
  const run = () => new Promise((resolve, reject) => {
    const proc = fork(script, [path], { stdio: 'inherit' })
    proc.once('message', resolve)
    proc.once('error', reject)
  })
  // Not a copy of the parent's engine (that would be FORKED): a fresh process and the store's lock.
  assert.deepEqual(await run(), { code: 'STORE_LOCKED' })
  await mem.close()
  assert.deepEqual(await run(), { opened: true })
})
