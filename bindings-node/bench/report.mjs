// Markdown for docs/benchmarks.md from what run.sh measured: node report.mjs WORK OUT.md
import { readFileSync, writeFileSync } from 'node:fs'
import { cpus, totalmem } from 'node:os'
import { join } from 'node:path'

const [work, outPath] = process.argv.slice(2)
const env = process.env
const sizes = env.BENCH_NODE_SIZES.split(',').map(Number)
const mcpNs = env.BENCH_NODE_MCP.split(',').map(Number)
const read = (f) => JSON.parse(readFileSync(join(work, f), 'utf8'))

function fmtNs(ns) {
  if (ns < 1e3) return `${ns.toFixed(0)} ns`
  if (ns < 1e6) return `${(ns / 1e3).toFixed(1)} µs`
  if (ns < 1e9) return `${(ns / 1e6).toFixed(2)} ms`
  return `${(ns / 1e9).toFixed(2)} s`
}
const tier = (n) => (n >= 1e6 ? `${n / 1e6}M` : `${n / 1e3}k`)
const x = (v) => `${v.toFixed(2)}×`
const here = new URL('.', import.meta.url).pathname
const version = (p) => JSON.parse(readFileSync(join(here, 'node_modules', p, 'package.json'), 'utf8')).version
const cpu = env.CPU_MODEL || cpus()[0]?.model || 'unknown'

const lines = []
lines.push('## Node binding (`memstrata` on npm)', '')
lines.push(
  `Measured by \`bindings-node/bench/run.sh\` (called from \`make bench\`): Node ${process.version}, ` +
  `the native module built \`--release\` (\`cargo build --release -p memstrata-node\`: the crate and profile ` +
  '`npm run build` (`napi build --release`) compiles, built with plain cargo so the core is shared with `compare`), on this machine: ' +
  `${cpu} (${cpus().length} logical cores), ${(totalmem() / 2 ** 30).toFixed(1)} GiB RAM. ` +
  `Load average (1, 5, 15 min) before the Node section: ${env.LOAD_BEFORE}; after: ${env.LOAD_AFTER}` +
  (Math.max(...`${env.LOAD_BEFORE} ${env.LOAD_AFTER}`.split(' ').map(Number)) > cpus().length * 0.75
    ? ' — other builds were running on this 2-core machine at the same time, so absolute figures are ' +
      'pessimistic and noisy; ratios between sides measured back to back suffer less.'
    : '.') +
  ` Wall time of this section: ${env.BENCH_NODE_ELAPSED} s. The corpus is the standard synthetic agent ` +
  'history, written once per tier as JSON Lines by `binding-workload data` (`benches/src/bin/binding_workload.rs`) ' +
  'and loaded by every side.', '')

lines.push('### Per-call overhead vs the Rust core', '')
lines.push(
  'Same calls, same data, same order, each side on a fresh store (`durability: "periodic"`), one process ' +
  'per side, the sides alternating which goes first from tier to tier: Rust is `binding-workload run`, Node is ' +
  '`bindings-node/bench/bench.mjs overhead` through `require("memstrata")`. Per tier of N episodes: N `shortTerm.store`s ' +
  '(N keys of ~100–400 bytes of JSON), 20,000 `shortTerm.retrieve`s of random existing keys, N `episodic.record`s ' +
  '(summary, content object, participants, tags, importance, timestamp), `optimize({ level: "aggressive" })` ' +
  '(one index segment on both sides), 20 warm-up searches, then keyword searches (2–4 words, top 10, each hit a decoded ' +
  'episode). Each call is timed on its own (Node: `process.hrtime.bigint()` around the `await`, so the figure is what ' +
  'a caller waits, including the hop to the libuv thread pool and back to the event loop; Rust: `Instant` around the ' +
  'call). *Node / Rust* is the ratio of the p50s.', '')
lines.push('| episodes | call | calls | Rust p50 | Rust p95 | Node p50 | Node p95 | Node − Rust (p50) | Node / Rust (p50) |')
lines.push('|---|---|---|---|---|---|---|---|---|')
const overheads = {}
for (const n of sizes) {
  const r = read(`rust-${n}.json`)
  const j = read(`node-${n}.json`)
  overheads[n] = { r, j }
  for (const op of ['store', 'retrieve', 'record', 'search']) {
    lines.push(`| ${tier(n)} | \`${op}\` | ${j[op].n} | ${fmtNs(r[op].p50)} | ${fmtNs(r[op].p95)} | ` +
      `${fmtNs(j[op].p50)} | ${fmtNs(j[op].p95)} | ${fmtNs(j[op].p50 - r[op].p50)} | ${x(j[op].p50 / r[op].p50)} |`)
  }
}
lines.push('')
lines.push('Ingest wall time (all N `record`s): ' + sizes.map((n) =>
  `${tier(n)}: Rust ${overheads[n].r.record_wall_s.toFixed(1)} s, Node ${overheads[n].j.record_wall_s.toFixed(1)} s`).join('; ') + '.', '')

lines.push('### Episode search: memstrata vs better-sqlite3 + FTS5', '')
const first = overheads[sizes[0]].j
lines.push(
  `In the same Node process, after the measurements above: better-sqlite3 ${version('better-sqlite3')} (SQLite ` +
  `${first.sqlite_version}) with the FTS5 schema, query and ranking of the Rust comparison ` +
  '(`benches/src/engines/fts5.rs`: contentless FTS5 table over summary, indexed body, participants and tags, ' +
  'porter tokenizer, bm25 weights, the query words OR-ed, top 10 joined back to the episode row and its content ' +
  "`JSON.parse`d), loaded with the same episodes and merged (`INSERT INTO episodes_fts(episodes_fts) VALUES('optimize')`), " +
  'as memstrata\'s index is merged by `optimize`. The same queries, interleaved query by query, the engine order ' +
  'alternating; memstrata through the binding (`await episodic.search(q, { limit: 10 })`), better-sqlite3 synchronous. ' +
  '*overlap*: share of FTS5\'s hits that memstrata also returned (the rankings differ: BM25 over different fields ' +
  'and tokenizers).', '')
lines.push('| episodes | queries | memstrata p50 | memstrata p95 | better-sqlite3 FTS5 p50 | p95 | speed-up (p50) | speed-up (p95) | overlap | goal | status |')
lines.push('|---|---|---|---|---|---|---|---|---|---|---|')
const ftsRows = {}
for (const n of sizes) {
  const j = overheads[n].j
  const s50 = j.cmp_sqlite.p50 / j.cmp_memstrata.p50
  const s95 = j.cmp_sqlite.p95 / j.cmp_memstrata.p95
  ftsRows[n] = s50
  const goal = n === 100000 ? '≥ 2× faster' : '(informative)'
  const status = n === 100000 ? (s50 >= 2 ? 'met' : '**missed**') : '–'
  lines.push(`| ${tier(n)} | ${j.cmp_memstrata.n} | ${fmtNs(j.cmp_memstrata.p50)} | ${fmtNs(j.cmp_memstrata.p95)} | ` +
    `${fmtNs(j.cmp_sqlite.p50)} | ${fmtNs(j.cmp_sqlite.p95)} | ${x(s50)} | ${x(s95)} | ${(j.cmp_overlap * 100).toFixed(0)}% | ${goal} | ${status} |`)
}
lines.push('')
lines.push('FTS5 bulk load (transactions of 1000, then the merge; not compared): ' +
  sizes.map((n) => `${tier(n)} ${overheads[n].j.fts_load_s.toFixed(1)} s`).join(', ') + '.', '')

lines.push('### Store then search: memstrata in process vs the reference MCP memory server', '')
lines.push(
  `N sequential stores of a fact (name, type, three observations of 8–50 words), then 300 sequential one-word ` +
  'searches, after 10 warm-up searches on the empty store; ops/s = (N + 300) ÷ the wall time of both phases ' +
  '(start-up excluded). memstrata: in process through the binding, `semantic.store(name, { entityType, observations })` ' +
  'and `semantic.query(word, { limit: 10 })` (what memstrata-mcp\'s `knowledge_store` / `knowledge_query` do). Reference: ' +
  `\`@modelcontextprotocol/server-memory\` ${version('@modelcontextprotocol/server-memory')} on the same Node, a child ` +
  `process driven through the official MCP TypeScript SDK client (\`@modelcontextprotocol/sdk\` ${version('@modelcontextprotocol/sdk')}, ` +
  '`StdioClientTransport`, `callTool`): `create_entities` with one entity / `search_nodes`; it re-reads and re-writes ' +
  'its whole JSON Lines file on every call, so its store latency grows with N (last-100 column).', '')
lines.push('| N + searches | memstrata ops/s | memstrata last-100 store | reference ops/s | reference last-100 store | memstrata ÷ reference | goal | status |')
lines.push('|---|---|---|---|---|---|---|---|')
const mcpRows = {}
for (const m of mcpNs) {
  const r = read(`mcp-${m}.json`)
  mcpRows[m] = r.ratio
  lines.push(`| ${m} + ${r.memstrata.searches} | ${r.memstrata.ops_s.toFixed(0)} | ${r.memstrata.last100_ms.toFixed(3)} ms | ` +
    `${r.reference.ops_s.toFixed(0)} | ${r.reference.last100_ms.toFixed(2)} ms | **${r.ratio.toFixed(1)}×** | ≥ 10× | ${r.ratio >= 10 ? 'met' : '**missed**'} |`)
}
lines.push('')
lines.push(
  'Targets of the Node binding (issue #11): search ≥ 2× faster than better-sqlite3 + FTS5 at 100k — ' +
  (ftsRows[100000] !== undefined ? `${x(ftsRows[100000])} (p50): ${ftsRows[100000] >= 2 ? 'met' : '**missed**'}` : 'the 100k tier was not run') +
  '; ≥ 10× the reference MCP server\'s throughput on store-then-search — ' +
  mcpNs.map((m) => `N = ${m}: ${mcpRows[m].toFixed(1)}× (${mcpRows[m] >= 10 ? 'met' : '**missed**'})`).join(', ') + '.', '')
writeFileSync(outPath, lines.join('\n') + '\n')
console.log(lines.join('\n'))
