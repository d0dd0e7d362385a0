// `npm pack`, install the tarball into a new project, use it from CommonJS, ESM and TypeScript.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { copyFileSync, readdirSync, writeFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { join } from 'node:path'

import { tempDir } from './helpers.mjs'

const pkg = fileURLToPath(new URL('..', import.meta.url))
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm'
const quiet = { encoding: 'utf8', env: { ...process.env, npm_config_audit: 'false', npm_config_fund: 'false', npm_config_update_notifier: 'false' } }

test('the packed tarball installs into a new project and works from CJS, ESM and TypeScript', (t) => {
  const dir = tempDir(t)
  const packed = JSON.parse(execFileSync(npm, ['pack', '--json', '--pack-destination', dir], { ...quiet, cwd: pkg }))
  const files = packed[0].files.map((f) => f.path).sort()
  for (const f of ['index.js', 'index.mjs', 'index.d.ts', 'binding.js', 'package.json']) assert.ok(files.includes(f), f)
  assert.ok(files.some((f) => f.endsWith('.node')), 'the native module is packed')
  assert.ok(!files.some((f) => f.startsWith('src/') || f.startsWith('__test__/')), files.join(' '))

  const project = join(dir, 'consumer')
  execFileSync('mkdir', ['-p', project])
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'consumer', version: '1.0.0', private: true }))
  execFileSync(npm, ['install', '--no-save', '--offline', join(dir, packed[0].filename)], { ...quiet, cwd: project })
  assert.ok(readdirSync(join(project, 'node_modules', 'memstrata')).includes('index.d.ts'))

  writeFileSync(join(project, 'cjs.cjs'), `
    const { Memory, MemstrataError } = require('memstrata')
    Memory.open().then(async (mem) => {
      await mem.shortTerm.store('k', { from: 'cjs' })
      const v = await mem.shortTerm.retrieve('k')
      const e = await mem.shortTerm.store('', 1).catch((e) => e)
      await mem.close()
      console.log(JSON.stringify({ v, isError: e instanceof MemstrataError, code: e.code }))
    })
  `)
  assert.deepEqual(JSON.parse(execFileSync(process.execPath, ['cjs.cjs'], { cwd: project, encoding: 'utf8' })),
    { v: { from: 'cjs' }, isError: true, code: 'INVALID_INPUT' })

  writeFileSync(join(project, 'esm.mjs'), `
    import { Memory, MemstrataError } from 'memstrata'
    import memstrata from 'memstrata'
    const mem = await Memory.open()
    await mem.semantic.store('k', { from: 'esm' })
    const v = await mem.semantic.retrieve('k')
    const e = await mem.semantic.update('missing', {}).catch((e) => e)
    await mem.close()
    console.log(JSON.stringify({ v, isError: e instanceof MemstrataError, code: e.code, same: memstrata.Memory === Memory }))
  `)
  assert.deepEqual(JSON.parse(execFileSync(process.execPath, ['esm.mjs'], { cwd: project, encoding: 'utf8' })),
    { v: { from: 'esm' }, isError: true, code: 'NOT_FOUND', same: true })

  // TypeScript in the consumer project resolves the installed package's types.
  copyFileSync(join(pkg, 'examples', 'readme.mts'), join(project, 'readme.mts'))
  execFileSync(process.execPath, [join(pkg, 'node_modules', 'typescript', 'bin', 'tsc'), '--strict', '--noEmit',
    '--module', 'node16', '--moduleResolution', 'node16', '--target', 'ES2022',
    '--typeRoots', join(pkg, 'node_modules', '@types'), '--types', 'node', 'readme.mts'], { cwd: project, encoding: 'utf8' })
})
