// Extract the TypeScript example of README.md (the ```ts block under "TypeScript / Node")
// and write it into a consumer project twice (scripts/test-dist.sh compiles both with tsc):
//   readme.mts  as written: an ES module with top-level await;
//   readme.cts  the same statements inside an async main(), as CommonJS (which has no
//               top-level await); the import line stays as written (tsc emits require()).
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

const [readme, out] = process.argv.slice(2)
const text = readFileSync(readme, 'utf8')
const section = text.indexOf('## TypeScript / Node')
if (section < 0) throw new Error('README.md has no "TypeScript / Node" section')
const m = /```ts\n([\s\S]*?)```/.exec(text.slice(section))
if (!m) throw new Error('no ```ts block in the "TypeScript / Node" section of README.md')
const example = m[1]
writeFileSync(join(out, 'readme.mts'), example)

const lines = example.split('\n')
const imports = lines.filter((l) => /^import /.test(l))
const body = lines.filter((l) => !/^import /.test(l))
writeFileSync(join(out, 'readme.cts'), [
  ...imports,
  'async function main(): Promise<void> {',
  ...body.map((l) => (l ? '  ' + l : l)),
  '}',
  'main().catch((e: unknown) => {',
  '  console.error(e)',
  '  process.exitCode = 1',
  '})',
  '',
].join('\n'))
console.error(`readme-example: ${lines.length} lines -> readme.mts, readme.cts`)
