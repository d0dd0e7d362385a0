// Node binding benchmarks, run by run.sh (`make bench`). No assertion on time.
//
//   node bench.mjs overhead DIR      per-call latency of store / retrieve / record / search
//                                    through the binding: the same calls, same order, same data
//                                    as `binding-workload run DIR` (Rust); then the same queries
//                                    against better-sqlite3 + FTS5 holding the same episodes,
//                                    interleaved query by query with memstrata's search.
//   node bench.mjs mcp DIR N REF_JS  store N facts then 300 one-word searches: memstrata in
//                                    process vs @modelcontextprotocol/server-memory through the
//                                    official MCP TypeScript SDK client over stdio.
//
// DIR holds what `binding-workload data N DIR` wrote (episodes.jsonl, kv.jsonl, meta.json),
// so both languages and both engines load exactly the same corpus. Prints one JSON object.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

const require = createRequire(import.meta.url)
// The library package itself (bindings-node/), with the release module run.sh built
// (NAPI_RS_NATIVE_LIBRARY_PATH points binding.js at it).
const { Memory } = require('../index.js')

const now = process.hrtime.bigint

function jsonl(path) {
  return readFileSync(path, 'utf8').split('\n').filter((l) => l.length > 0).map((l) => JSON.parse(l))
}

function summary(ns) {
  ns.sort((a, b) => a - b)
  const q = (p) => ns[Math.round((ns.length - 1) * p)]
  return { n: ns.length, p50: q(0.5), p95: q(0.95), mean: ns.reduce((a, b) => a + b, 0) / ns.length }
}

async function timed(n, f) {
  const ns = new Array(n)
  for (let i = 0; i < n; i++) {
    const t = now()
    await f(i)
    ns[i] = Number(now() - t)
  }
  return summary(ns)
}

function scratch(dir) {
  return mkdtempSync(join(dir, 'node-'))
}

// ---- FTS5 (better-sqlite3): the schema, query and decoding of benches/src/engines/fts5.rs.
const SCHEMA = `
CREATE TABLE IF NOT EXISTS episodes(
    rowid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    ts INTEGER NOT NULL,
    importance INTEGER NOT NULL,
    summary TEXT NOT NULL,
    participants TEXT NOT NULL,
    tags TEXT NOT NULL,
    content TEXT NOT NULL
);
CREATE VIRTUAL TABLE IF NOT EXISTS episodes_fts USING fts5(
    summary, body, participants, tags,
    content = '', contentless_delete = 1,
    tokenize = 'porter unicode61'
);`
const SEARCH = `
SELECT e.id, e.ts, e.summary, e.content, e.participants, e.tags, e.importance
FROM (SELECT rowid, bm25(episodes_fts, 1.5, 1.0, 1.0, 1.2) AS score
      FROM episodes_fts WHERE episodes_fts MATCH ? ORDER BY score LIMIT ?) AS h
JOIN episodes AS e ON e.rowid = h.rowid
ORDER BY h.score`

function queryWords(q) {
  const out = []
  for (const w of q.split(/[^\p{L}\p{N}]+/u)) {
    if (w.length === 0) continue
    const l = w.toLowerCase()
    if (!out.includes(l)) out.push(l)
  }
  return out
}

const matchExpr = (q) => queryWords(q).map((w) => `"${w.replace(/"/g, '""')}"`).join(' OR ')

function openFts(dir, episodes) {
  const Database = require('better-sqlite3')
  const db = new Database(join(dir, 'fts.db'))
  db.pragma('journal_mode = WAL')
  db.pragma('synchronous = NORMAL')
  db.exec(SCHEMA)
  const insEp = db.prepare(`INSERT INTO episodes(rowid, id, ts, importance, summary, participants, tags, content)
                            VALUES (?, ?, ?, ?, ?, ?, ?, ?)`)
  const insFts = db.prepare('INSERT INTO episodes_fts(rowid, summary, body, participants, tags) VALUES (?, ?, ?, ?, ?)')
  // Bulk load in transactions of 1000 (ingest is not what is compared here).
  const load = db.transaction((rows, base) => {
    rows.forEach((e, k) => {
      const rowid = base + k + 1
      const parts = e.participants.join(' ')
      const tags = e.tags.join(' ')
      insEp.run(rowid, e.id, e.timestamp_ms, e.importance, e.summary, parts, tags, JSON.stringify(e.content))
      insFts.run(rowid, e.summary, e.body, parts, tags)
    })
  })
  const t = Date.now()
  for (let i = 0; i < episodes.length; i += 1000) load(episodes.slice(i, i + 1000), i)
  // One merged FTS5 b-tree, as memstrata's index is one segment after optimize(aggressive).
  db.exec("INSERT INTO episodes_fts(episodes_fts) VALUES('optimize')")
  db.pragma('wal_checkpoint(TRUNCATE)')
  const loadS = (Date.now() - t) / 1000
  const stmt = db.prepare(SEARCH)
  const search = (q, limit) => {
    const expr = matchExpr(q)
    if (expr.length === 0) return []
    const rows = stmt.all(expr, limit)
    for (const r of rows) r.content = JSON.parse(r.content)
    return rows
  }
  const version = db.prepare('SELECT sqlite_version() AS v').get().v
  return { db, search, loadS, version }
}

async function overhead(dir) {
  const meta = JSON.parse(readFileSync(join(dir, 'meta.json'), 'utf8'))
  const kv = jsonl(join(dir, 'kv.jsonl'))
  const episodes = jsonl(join(dir, 'episodes.jsonl'))
  const { lookups, queries, search_warmup: warmup } = meta
  const tmp = scratch(dir)
  const out = {}
  try {
    const mem = await Memory.open(join(tmp, 'store'), { durability: 'periodic' })
    const st = mem.shortTerm
    out.store = await timed(kv.length, (i) => st.store(kv[i][0], kv[i][1]))
    out.retrieve = await timed(lookups.length, async (i) => {
      if ((await st.retrieve(lookups[i])) == null) throw new Error(`missing key ${lookups[i]}`)
    })
    const ep = mem.episodic
    const t0 = now()
    out.record = await timed(episodes.length, (i) => {
      const e = episodes[i]
      return ep.record(e.summary, {
        content: e.content, participants: e.participants, tags: e.tags, importance: e.importance,
        timestamp: new Date(e.timestamp_ms),
      })
    })
    out.record_wall_s = Number(now() - t0) / 1e9
    // One index segment on both sides: the segment layout otherwise depends on commit timing.
    await mem.optimize({ level: 'aggressive' })
    for (const q of queries.slice(0, warmup)) await ep.search(q, { limit: 10 })
    const measured = queries.slice(warmup)
    out.search = await timed(measured.length, (i) => ep.search(measured[i], { limit: 10 }))

    // memstrata vs better-sqlite3 + FTS5: same episodes, same queries, top 10 decoded,
    // interleaved query by query (the order alternating), after the same warm-up.
    const fts = openFts(tmp, episodes)
    out.fts_load_s = fts.loadS
    out.sqlite_version = fts.version
    for (const q of queries.slice(0, warmup)) fts.search(q, 10)
    const ms = []
    const sq = []
    let hits = 0
    let agree = 0
    for (let i = 0; i < measured.length; i++) {
      const q = measured[i]
      let a
      let b
      const runM = async () => {
        const t = now()
        a = await ep.search(q, { limit: 10 })
        ms.push(Number(now() - t))
      }
      const runS = () => {
        const t = now()
        b = fts.search(q, 10)
        sq.push(Number(now() - t))
      }
      if (i % 2 === 0) { await runM(); runS() } else { runS(); await runM() }
      hits += b.length
      agree += b.filter((r) => a.some((h) => h.episode.summary === r.summary && h.episode.timestamp.getTime() === r.ts)).length
    }
    out.cmp_memstrata = summary(ms)
    out.cmp_sqlite = summary(sq)
    out.cmp_overlap = hits ? agree / hits : 0
    fts.db.close()
    await mem.close()
  } finally {
    rmSync(tmp, { recursive: true, force: true })
  }
  return out
}

// ---- memstrata in process vs the reference MCP memory server over stdio (SDK client).
const MCP_WARMUP = 10
const MCP_SEARCHES = 300

async function phases(store, search, n, words) {
  for (let i = 0; i < MCP_WARMUP; i++) await search(words[i % words.length])
  const t0 = now()
  const lat = []
  for (let i = 0; i < n; i++) {
    const t = now()
    await store(i)
    lat.push(Number(now() - t))
  }
  const t1 = now()
  for (let i = 0; i < MCP_SEARCHES; i++) await search(words[i % words.length])
  const t2 = now()
  const storeS = Number(t1 - t0) / 1e9
  const searchS = Number(t2 - t1) / 1e9
  const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length / 1e6
  return {
    n, searches: MCP_SEARCHES, store_s: storeS, search_s: searchS,
    ops_s: (n + MCP_SEARCHES) / (storeS + searchS),
    first100_ms: mean(lat.slice(0, 100)), last100_ms: mean(lat.slice(-100)),
  }
}

async function mcp(dir, n, refJs) {
  const meta = JSON.parse(readFileSync(join(dir, 'meta.json'), 'utf8'))
  const facts = meta.facts.slice(0, n)
  if (facts.length < n) throw new Error(`meta.json has ${facts.length} facts, ${n} asked`)
  const words = meta.words
  const out = {}
  const tmp = scratch(dir)
  try {
    // memstrata, in process: what memstrata-mcp's knowledge_store / knowledge_query do.
    const mem = await Memory.open(join(tmp, 'store'), { durability: 'periodic' })
    const sem = mem.semantic
    out.memstrata = await phases(
      (i) => sem.store(facts[i].name, { entityType: facts[i].entityType, observations: facts[i].observations }),
      (w) => sem.query(w, { limit: 10 }), n, words)
    await mem.close()

    // The reference server through the official TypeScript SDK client, stdio.
    const { Client } = await import('@modelcontextprotocol/sdk/client/index.js')
    const { StdioClientTransport } = await import('@modelcontextprotocol/sdk/client/stdio.js')
    const transport = new StdioClientTransport({
      command: process.execPath, args: [refJs],
      env: { ...process.env, MEMORY_FILE_PATH: join(tmp, 'memory.jsonl') }, stderr: 'ignore',
    })
    const client = new Client({ name: 'memstrata-bench', version: '0.0.0' })
    await client.connect(transport)
    const call = async (name, args) => {
      const r = await client.callTool({ name, arguments: args }, undefined, { timeout: 120_000 })
      if (r.isError) throw new Error(`${name}: ${JSON.stringify(r.content)}`)
      return r
    }
    out.reference = await phases(
      (i) => call('create_entities', { entities: [facts[i]] }),
      (w) => call('search_nodes', { query: w }), n, words)
    await client.close()
  } finally {
    rmSync(tmp, { recursive: true, force: true })
  }
  out.ratio = out.memstrata.ops_s / out.reference.ops_s
  return out
}

const [cmd, dir, ...rest] = process.argv.slice(2)
let result
if (cmd === 'overhead') result = await overhead(dir)
else if (cmd === 'mcp') result = await mcp(dir, Number(rest[0]), rest[1])
else throw new Error('usage: bench.mjs overhead DIR | mcp DIR N REF_JS')
console.log(JSON.stringify(result))
