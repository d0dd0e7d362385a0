#!/usr/bin/env node
// Development build of the native module, used by `make test-node`
// (scripts/test-node.sh) and `npm run build:dev`.
//
// `napi build` (what `npm run build` runs) always passes `--target <host triple>` to
// cargo, which puts every artifact under target/<triple>/ instead of target/debug/:
// a second copy of the core, tantivy and sled next to the one `cargo test` built.
// This script produces the same files napi build does (the .node file named for
// this platform, binding.js, index.d.ts) from a plain `cargo build -p memstrata-node`
// into the workspace's target/debug, so CI compiles the core once.
//
// Type definitions: napi-derive appends each crate's declarations to
// $NAPI_TYPE_DEF_TMP_FOLDER/<crate name> while the crate is compiled, and the CLI
// sweeps every file in that folder. A crate cargo considers fresh is not compiled,
// so it writes nothing: as the CLI does, set NAPI_FORCE_BUILD_<CRATE> (tracked by
// napi-build for memstrata-node and by an option_env! in memstrata-bindings-common)
// to recompile the crates whose declarations are missing or older than their sources.
import { execFileSync } from 'node:child_process'
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync, rmSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

import { generateTypeDef, parseTriple, writeJsBinding } from '@napi-rs/cli'

const here = resolve(dirname(fileURLToPath(import.meta.url)), '..')
const repo = resolve(here, '..')
const targetDir = resolve(process.env.CARGO_TARGET_DIR || join(repo, 'target'))
const profile = process.env.MEMSTRATA_NODE_PROFILE || 'dev'
const pkg = JSON.parse(readFileSync(join(here, 'package.json'), 'utf8'))
const binaryName = pkg.napi.binaryName

// Crates whose napi declarations end up in index.d.ts, and their source folders.
const crates = { 'memstrata-node': join(repo, 'bindings-node', 'src') }
if (existsSync(join(repo, 'bindings-common', 'Cargo.toml'))) {
  crates['memstrata-bindings-common'] = join(repo, 'bindings-common', 'src')
}

function newestMtime(dir) {
  let newest = 0
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name)
    newest = Math.max(newest, e.isDirectory() ? newestMtime(p) : statSync(p).mtimeMs)
  }
  return newest
}

const typeDefDir = join(targetDir, 'napi-rs', `memstrata-node-dev-${profile}`)
mkdirSync(typeDefDir, { recursive: true })
const env = { ...process.env, CARGO_TARGET_DIR: targetDir, NAPI_TYPE_DEF_TMP_FOLDER: typeDefDir }
for (const [name, src] of Object.entries(crates)) {
  const file = join(typeDefDir, name)
  if (!existsSync(file) || statSync(file).mtimeMs < newestMtime(src)) {
    rmSync(file, { force: true })
    env[`NAPI_FORCE_BUILD_${name.replace(/-/g, '_').toUpperCase()}`] = String(Date.now())
  }
}

const cargoArgs = ['build', '-p', 'memstrata-node', '--profile', profile]
console.error(`build-dev: cargo ${cargoArgs.join(' ')}`)
execFileSync('cargo', cargoArgs, { cwd: repo, env, stdio: 'inherit' })

const host = /^host: (.+)$/m.exec(execFileSync('rustc', ['-vV'], { encoding: 'utf8' }))[1]
const target = parseTriple(host)
const profileDir = profile === 'dev' ? 'debug' : profile
const libName = process.platform === 'win32' ? 'memstrata_node.dll'
  : process.platform === 'darwin' ? 'libmemstrata_node.dylib' : 'libmemstrata_node.so'
const nodeFile = join(here, `${binaryName}.${target.platformArchABI}.node`)
// Copy to a new inode: a process that still has the old module mapped keeps it intact.
rmSync(nodeFile, { force: true })
copyFileSync(join(targetDir, profileDir, libName), nodeFile)

const { exports, dts } = await generateTypeDef({
  typeDefDir,
  configDtsHeaderFile: pkg.napi.dtsHeaderFile,
  cwd: here,
  declareBindingTarget: true,
})
// Doc comments of fields declared through macro_rules! come through as raw string
// tokens (\`r" Key."\`); keep their text only.
writeFileSync(join(here, 'index.d.ts'), dts.replace(/^(\s*(?:\/\*\*|\*)) r(#*)"(.*?)"?\2?( \*\/)?$/gm, '$1$3$4'))
await writeJsBinding({
  platform: true,
  idents: exports,
  jsBinding: 'binding.js',
  binaryName,
  packageName: pkg.name,
  version: pkg.version,
  outputDir: here,
})
// index.mjs names every export of index.js (the native ones and MemstrataError).
const names = [...exports.filter((n) => n !== '__napiBindingTarget'), 'MemstrataError'].sort()
writeFileSync(
  join(here, 'index.mjs'),
  `// ESM entry point of the \`memstrata\` package: the CommonJS module's exports, by name.
// Written by scripts/build-dev.mjs from the native module's exports (kept in git).
import memstrata from './index.js'

export const {
${names.map((n) => `  ${n},`).join('\n')}
} = memstrata
export default memstrata
`,
)
console.error(`build-dev: ${nodeFile} (${exports.length} exports), index.d.ts, binding.js`)
