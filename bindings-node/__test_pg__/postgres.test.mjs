// The Node binding on a PostgreSQL store: `Memory.open("postgres://...")`.
//
// Run by scripts/test-node-pg.sh under scripts/pg-test.sh (`make test-pg`), which starts a
// throwaway server and sets MEMSTRATA_TEST_PG_URL. Without it every test here fails: the
// PostgreSQL suites never skip. Each test works in a schema of its own (`?schema=node_<hex>`).
// Kept out of __test__/ so that `make test-node` (no server) does not pick these up.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { inspect } from 'node:util'

import { Memory, MemstrataError } from '../index.mjs'
import { rejectsWith } from '../__test__/helpers.mjs'

const entry = new URL('../index.js', import.meta.url).pathname

/** The server URL of scripts/pg-test.sh; a failure (not a skip) without it. */
function serverUrl() {
  const base = process.env.MEMSTRATA_TEST_PG_URL
  if (!base) {
    assert.fail('MEMSTRATA_TEST_PG_URL is not set: run through scripts/pg-test.sh (make test-pg)')
  }
  return base
}

/** A store URL on a fresh schema, its password, and the URL as `mem.path` shows it. */
function freshStore() {
  const base = serverUrl()
  const url = `${base}?schema=node_${randomUUID().replace(/-/g, '').slice(0, 16)}`
  const password = decodeURIComponent(new URL(base).password)
  assert.ok(password.length > 0, 'the test server has a password (scripts/pg-test.sh sets one)')
  return { url, password, masked: url.replace(`:${new URL(base).password}@`, ':***@') }
}

/**
 * Run `code` in a second Node process (CommonJS, `require(process.argv[1])` is the package)
 * with the store URL in its environment (not on its command line); resolves to the JSON
 * object it prints on its last stdout line. `onLine` sees every stdout line as it comes.
 */
function inChildProcess(code, storeUrl, onLine = () => {}) {
  return new Promise((resolve, reject) => {
    const proc = spawn(process.execPath, ['-e', code, entry], {
      env: { ...process.env, MEMSTRATA_NODE_PG_STORE: storeUrl },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let out = ''
    let err = ''
    let pending = ''
    proc.stdout.on('data', (d) => {
      out += d
      pending += d
      const lines = pending.split('\n')
      pending = lines.pop()
      for (const line of lines) onLine(line)
    })
    proc.stderr.on('data', (d) => { err += d })
    proc.once('error', reject)
    proc.once('close', (status, signal) => {
      if (status !== 0) {
        reject(new Error(`child process failed (status ${status}, signal ${signal}): ${err}`))
        return
      }
      try {
        resolve(JSON.parse(out.trim().split('\n').pop()))
      } catch (e) {
        reject(new Error(`child process printed no JSON line: ${out} ${err}`, { cause: e }))
      }
    })
  })
}

test('two Memory objects on one URL share one engine and see each other\'s writes', async () => {
  const { url, masked } = freshStore()
  const a = await Memory.open(url)
  const b = await Memory.open(url)
  try {
    assert.equal(a.isTemporary, false)
    await a.shortTerm.store('draft', { text: 'written through a' })
    const eid = await a.episodic.record('Migrated the billing service to PostgreSQL', {
      tags: ['migration'],
      participants: ['alice'],
      importance: 7,
    })
    await a.semantic.store('billing-db', { engine: 'postgres', major: 15 })
    const sid = (await a.sessionCreate('node-pg')).sessionId
    await a.sessionSave(sid, { step: 1 })

    assert.deepEqual(await b.shortTerm.retrieve('draft'), { text: 'written through a' })
    assert.equal((await b.episodic.get(eid)).summary, 'Migrated the billing service to PostgreSQL')
    assert.deepEqual((await b.episodic.search('billing migration')).map((h) => h.episode.id), [eid])
    assert.deepEqual(await b.semantic.retrieve('billing-db'), { engine: 'postgres', major: 15 })
    assert.deepEqual((await b.semantic.query('postgres')).map((h) => h.key), ['billing-db'])
    assert.deepEqual((await b.sessionRestore(sid)).content, { step: 1 })
    // One engine per URL in a process: b's metrics count a's calls.
    const ops = (await b.status({ includeMetrics: true })).metrics.operations
    assert.equal(ops['short_term.store']?.count, 1, JSON.stringify(ops))
    assert.equal(ops['episodic.record']?.count, 1, JSON.stringify(ops))
    assert.equal(b.path, masked)

    // Closing one handle leaves the other (and the shared engine) working.
    await a.close()
    assert.equal(a.closed, true)
    assert.equal(b.closed, false)
    assert.equal((await b.semantic.update('billing-db', { major: 16 })).version, 2)
    assert.deepEqual(await b.semantic.retrieve('billing-db'), { engine: 'postgres', major: 16 })
  } finally {
    await a.close()
    await b.close()
  }
  // Everything is in the database: a new engine reads it back.
  const c = await Memory.open(url)
  try {
    assert.deepEqual(await c.semantic.retrieve('billing-db'), { engine: 'postgres', major: 16 })
    assert.deepEqual(await c.shortTerm.retrieve('draft'), { text: 'written through a' })
    assert.equal((await c.episodic.search('billing')).length, 1)
  } finally {
    await c.close()
  }
})

test('a second Node process reads and searches the first one\'s writes, and the other way round', async () => {
  const { url, masked } = freshStore()
  const mem = await Memory.open(url)
  try {
    await mem.shortTerm.store('from-parent', { pid: process.pid })
    const parentEpisode = await mem.episodic.record('The parent process inspected the lighthouse lamp', { tags: ['parent'] })
    await mem.semantic.store('parent-fact', 'harbour charts live in the north archive')
    const crew = await mem.namespace('crew')
    await crew.semantic.store('roster', ['ana', 'ben'])
    await crew.close()

    const child = await inChildProcess(`
      const { Memory } = require(process.argv[1])
      ;(async () => {
        // Another process on the same URL: no STORE_LOCKED (a sled store would refuse it).
        const mem = await Memory.open(process.env.MEMSTRATA_NODE_PG_STORE)
        const crew = await mem.namespace('crew')
        const seen = {
          path: mem.path,
          shortTerm: await mem.shortTerm.retrieve('from-parent'),
          knowledge: await mem.semantic.retrieve('parent-fact'),
          roster: await crew.semantic.retrieve('roster'),
          episodeHits: (await mem.episodic.search('lighthouse lamp')).map((h) => h.episode.id),
          knowledgeHits: (await mem.semantic.query('harbour charts')).map((h) => h.key),
        }
        const written = {
          episode: await mem.episodic.record('The child process repaired the foghorn', { tags: ['child'] }),
          session: (await mem.sessionCreate('child')).sessionId,
        }
        await mem.sessionSave(written.session, { from: 'child' })
        await mem.semantic.store('child-fact', { foghorn: 'repaired' })
        await mem.shortTerm.store('from-child', { pid: process.pid })
        await crew.semantic.update('roster', ['ana', 'ben', 'cy'])
        // Every handle closed: the engine goes with the last.
        await crew.close()
        await mem.close()
        console.log(JSON.stringify({ pid: process.pid, seen, written }))
      })().catch((e) => { console.error(e.code, e.message); process.exit(1) })
    `, url)

    assert.notEqual(child.pid, process.pid)
    assert.deepEqual(child.seen, {
      path: masked,
      shortTerm: { pid: process.pid },
      knowledge: 'harbour charts live in the north archive',
      roster: ['ana', 'ben'],
      episodeHits: [parentEpisode],
      knowledgeHits: ['parent-fact'],
    })
    // The parent, open the whole time, reads and searches what the child wrote.
    assert.deepEqual(await mem.shortTerm.retrieve('from-child'), { pid: child.pid })
    assert.deepEqual(await mem.semantic.retrieve('child-fact'), { foghorn: 'repaired' })
    assert.equal((await mem.episodic.get(child.written.episode)).summary, 'The child process repaired the foghorn')
    assert.deepEqual((await mem.episodic.search('foghorn')).map((h) => h.episode.id), [child.written.episode])
    assert.deepEqual((await mem.semantic.query('foghorn')).map((h) => h.key), ['child-fact'])
    assert.deepEqual((await mem.sessionRestore(child.written.session)).content, { from: 'child' })
    const crew2 = await mem.namespace('crew')
    const roster = await crew2.semantic.get('roster')
    await crew2.close()
    assert.deepEqual(roster.knowledge, ['ana', 'ben', 'cy'])
    assert.equal(roster.version, 2)
  } finally {
    await mem.close()
  }
})

test('two processes writing at once: every write of both is there', async () => {
  const { url } = freshStore()
  const mem = await Memory.open(url)
  const n = 40
  try {
    let childOpen
    const opened = new Promise((resolve) => { childOpen = resolve })
    const child = inChildProcess(`
      const { Memory } = require(process.argv[1])
      ;(async () => {
        const mem = await Memory.open(process.env.MEMSTRATA_NODE_PG_STORE)
        console.log('open')
        for (let i = 0; i < ${n}; i++) {
          await mem.episodic.record('child event ' + i + ' about turbines', { tags: ['child'] })
          await mem.shortTerm.store('child-' + i, i)
        }
        await mem.close()
        console.log(JSON.stringify({ done: true }))
      })().catch((e) => { console.error(e.code, e.message); process.exit(1) })
    `, url, (line) => { if (line === 'open') childOpen() })
    // Both write at the same time: the parent starts once the child has the store open.
    await Promise.race([opened, child])
    for (let i = 0; i < n; i++) {
      await mem.episodic.record(`parent event ${i} about turbines`, { tags: ['parent'] })
      await mem.shortTerm.store(`parent-${i}`, i)
    }
    assert.deepEqual(await child, { done: true })

    const hits = await mem.episodic.search('turbines', { limit: 1000 })
    const summaries = hits.map((h) => h.episode.summary).sort()
    const expected = Array.from({ length: n }, (_, i) => [`child event ${i} about turbines`, `parent event ${i} about turbines`]).flat().sort()
    assert.deepEqual(summaries, expected)
    assert.equal(new Set(hits.map((h) => h.episode.id)).size, 2 * n, 'no duplicate ids')
    const keys = (await mem.shortTerm.keys()).sort()
    assert.deepEqual(keys, Array.from({ length: n }, (_, i) => [`child-${i}`, `parent-${i}`]).flat().sort())
  } finally {
    await mem.close()
  }
})

test('mem.path is the URL with its password masked, however the password is given', async () => {
  const { url, password, masked } = freshStore()
  const mem = await Memory.open(url)
  try {
    assert.equal(mem.path, masked)
    assert.ok(mem.path.includes(':***@'))
    assert.ok(!mem.path.includes(password))
    await mem.shortTerm.store('k', 'v')
  } finally {
    await mem.close()
  }
  // The password as a `password=` parameter instead of in the user info.
  const base = new URL(serverUrl())
  const schema = new URL(url).searchParams.get('schema')
  const inQuery = `postgres://${base.username}@${base.host}${base.pathname}?schema=${schema}&password=${base.password}`
  const again = await Memory.open(inQuery)
  try {
    assert.equal(again.path, `postgres://${base.username}@${base.host}${base.pathname}?schema=${schema}&password=***`)
    assert.ok(!again.path.includes(password))
    assert.ok(!inspect(again).includes(password) && !String(again).includes(password))
    assert.equal(await again.shortTerm.retrieve('k'), 'v')
  } finally {
    await again.close()
  }
})

test('a wrong password is a STORAGE MemstrataError that names the cause, not the password', async () => {
  const { url, password } = freshStore()
  const wrongPassword = `wrong${randomUUID().replace(/-/g, '')}`
  const base = new URL(serverUrl())
  const wrong = url.replace(`:${base.password}@`, `:${wrongPassword}@`)
  assert.notEqual(wrong, url)
  const e = await Memory.open(wrong).then(
    () => assert.fail('opening with a wrong password succeeded'),
    (x) => x,
  )
  assert.ok(e instanceof MemstrataError, `a MemstrataError, got ${e}`)
  assert.equal(e.code, 'STORAGE', e.message)
  assert.equal(e.field, null)
  assert.match(e.message, /cannot connect to PostgreSQL/)
  assert.match(e.message, /password authentication failed/)
  assert.ok(e.message.includes(`${base.username}:***@${base.host}`), e.message)
  assert.ok(!e.message.includes(wrongPassword), 'the message does not contain the password given')
  assert.ok(!e.message.includes(password), 'nor the real one')
  assert.ok(!String(e.stack).includes(wrongPassword))
})

test('an unreachable server is a STORAGE error without the password', async () => {
  serverUrl()
  const e = await Memory.open('postgres://bob:hunter2secret@127.0.0.1:1/mem?schema=x').then(
    () => assert.fail('opening an unreachable server succeeded'),
    (x) => x,
  )
  assert.ok(e instanceof MemstrataError, `a MemstrataError, got ${e}`)
  assert.equal(e.code, 'STORAGE', e.message)
  assert.match(e.message, /cannot connect to PostgreSQL at postgres:\/\/bob:\*\*\*@127\.0\.0\.1:1\/mem/)
  assert.ok(!e.message.includes('hunter2secret'), e.message)
})

test('a bad schema name is INVALID_INPUT on path', async () => {
  await rejectsWith(Memory.open(`${serverUrl()}?schema=Bad-Name`), 'INVALID_INPUT', 'path')
})

test('close(), then every operation rejects with CLOSED; the store stays usable through a new open', async () => {
  const { url } = freshStore()
  const mem = await Memory.open(url)
  const shortTerm = mem.shortTerm
  const episodic = mem.episodic
  const ns = await mem.namespace('other')
  await shortTerm.store('kept', 1)
  await ns.semantic.store('kept', 'in another context')
  await mem.close()
  assert.equal(mem.closed, true)
  await rejectsWith(mem.shortTerm.retrieve('kept'), 'CLOSED')
  await rejectsWith(shortTerm.store('k', 2), 'CLOSED')
  await rejectsWith(episodic.record('after close'), 'CLOSED')
  await rejectsWith(episodic.search('anything'), 'CLOSED')
  await rejectsWith(mem.semantic.store('k', 1), 'CLOSED')
  await rejectsWith(mem.namespace('x'), 'CLOSED')
  await rejectsWith(mem.flush(), 'CLOSED')
  await rejectsWith(mem.status(), 'CLOSED')
  assert.throws(() => mem.path, (e) => e instanceof MemstrataError && e.code === 'CLOSED')
  await mem.close() // closing twice is fine
  // A namespace handle is a handle of its own: it stays open until closed.
  assert.equal(await ns.semantic.retrieve('kept'), 'in another context')
  await ns.close()
  await rejectsWith(ns.semantic.retrieve('kept'), 'CLOSED')

  const reopened = await Memory.open(url)
  try {
    assert.equal(await reopened.shortTerm.retrieve('kept'), 1)
    assert.equal((await reopened.episodic.search('after close')).length, 0)
  } finally {
    await reopened.close()
  }
})
