// The README's TypeScript example: `tsc --strict --noEmit` accepts it, misuse of the API
// is rejected by the compiler (index.d.ts is precise), and the compiled example runs.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync, spawnSync } from 'node:child_process'
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { join } from 'node:path'

import { tempDir } from './helpers.mjs'

const pkg = fileURLToPath(new URL('..', import.meta.url))
const tsc = join(pkg, 'node_modules', 'typescript', 'bin', 'tsc')

test('tsc --strict --noEmit accepts index.d.ts and examples/readme.mts', () => {
  execFileSync(process.execPath, [tsc, '-p', join(pkg, 'tsconfig.json')], { cwd: pkg, stdio: 'pipe' })
})

test('tsc rejects misuse of the API', () => {
  const dir = join(pkg, '.example-build')
  mkdirSync(dir, { recursive: true })
  const bad = join(dir, 'misuse.mts')
  writeFileSync(bad, `
    import { Memory } from 'memstrata'
    const mem = await Memory.open()
    await mem.shortTerm.store(1, 'number as key')
    const e = await mem.episodic.get('id')
    e.summary.toUpperCase()
    await mem.shortTerm.store('k', () => 1)
    await mem.optimize({ level: 'extreme' })
    const n: number = (await mem.sessionRestore('s')).content
  `)
  const r = spawnSync(process.execPath, [tsc, '--strict', '--noEmit', '--module', 'node16', '--moduleResolution', 'node16',
    '--target', 'ES2022', '--types', 'node', bad], { cwd: pkg, encoding: 'utf8' })
  assert.notEqual(r.status, 0)
  const lines = r.stdout.split('\n').filter((l) => l.includes('error TS'))
  // One error per misuse: key type, possibly-null result, function value, level, JsonValue to number.
  assert.equal(lines.length, 5, r.stdout)
})

test('the compiled README example runs', (t) => {
  execFileSync(process.execPath, [tsc, '-p', join(pkg, 'examples', 'tsconfig.json')], { cwd: pkg, stdio: 'pipe' })
  const cwd = tempDir(t)
  const out = execFileSync(process.execPath, [join(pkg, '.example-build', 'readme.mjs')], { cwd, encoding: 'utf8' })
  assert.match(out, /Deployed v2 to staging/)
  assert.match(out, /\{ step: 3 \}/)
  assert.match(out, /completed/)
})

test('the README shows exactly the example that is type-checked and run here', () => {
  const readme = readFileSync(join(pkg, '..', 'README.md'), 'utf8')
  const block = readme.match(/```ts\n([\s\S]*?)\n```/)
  assert.ok(block, 'README.md has a ```ts block')
  const example = readFileSync(join(pkg, 'examples', 'readme.mts'), 'utf8')
    .split('\n')
    .filter((l) => !l.startsWith('//'))
    .join('\n')
    .trim()
  assert.equal(block[1].trim(), example)
})
