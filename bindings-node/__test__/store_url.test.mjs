// A store URL's password never shows: not in an open error's message, stack or
// util.inspect, nor on stderr. No server needed (nothing listens on loopback port 1);
// mem.path and inspect of an open PostgreSQL store are in __test_pg__/postgres.test.mjs.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { inspect } from 'node:util'
import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'

import { Memory, MemstrataError } from '../index.mjs'

const SECRET = 'hunter2'

const unreachable = [
  `postgres://bob:${SECRET}@127.0.0.1:1/mem?schema=team`,
  `postgres://bob@127.0.0.1:1/mem?password=${SECRET}`,
  `POSTGRES://bob:${SECRET}@127.0.0.1:1/mem`,
]

const malformed = [
  [`postgres://bob:${SECRET}@127.0.0.1:99999/mem`, /port/],
  [`postgres://bob@127.0.0.1/mem?password=${SECRET}&schema=Team-A`, /`schema`/],
  [`postgres:///mem?password=${SECRET}`, /no host/],
  // The client knows `password` only in lower case, and not `sslpassword`: refused, still masked.
  [`postgres://bob@127.0.0.1:1/mem?schema=team&PassWord=${SECRET}`, /unknown option `PassWord`/],
  [`postgres://bob@127.0.0.1:1/mem?sslpassword=${SECRET}`, /unknown option `sslpassword`/],
]

const shown = (e) => [String(e), e.message, e.stack, inspect(e), JSON.stringify(e)].join(' ')

test('an unreachable server is an error without the password', async () => {
  for (const url of unreachable) {
    const e = await Memory.open(url).catch((x) => x)
    assert.ok(e instanceof MemstrataError, `${url}: ${e}`)
    assert.equal(e.code, 'STORAGE', url)
    const text = shown(e)
    assert.ok(!text.includes(SECRET), text)
    assert.ok(text.includes('127.0.0.1:1') && text.includes('***'), text)
  }
})

test('a malformed URL is refused naming path, without the password', async () => {
  for (const [url, part] of malformed) {
    const e = await Memory.open(url).catch((x) => x)
    assert.ok(e instanceof MemstrataError, `${url}: ${e}`)
    assert.equal(e.code, 'INVALID_INPUT', url)
    assert.equal(e.field, 'path', url)
    assert.match(e.message, part)
    assert.ok(!shown(e).includes(SECRET), shown(e))
  }
})

test('nothing the process prints shows the password (uncaught rejection included)', () => {
  const index = fileURLToPath(new URL('../index.mjs', import.meta.url))
  const script = `import { Memory } from ${JSON.stringify(index)}\n` +
    `await Memory.open(${JSON.stringify(unreachable[1])})\n`
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' })
  assert.notEqual(r.status, 0)
  assert.match(r.stderr, /password=\*\*\*/)
  assert.ok(!(r.stdout + r.stderr).includes(SECRET), r.stderr)
})
