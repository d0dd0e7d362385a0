// Host-supplied embeddings, hybrid search and the embedder hook (synthetic vectors).
import { test } from 'node:test'
import assert from 'node:assert/strict'

import { Memory, MemstrataError } from '../index.mjs'
import { rejectsWith } from './helpers.mjs'

/** A deterministic toy embedding: letter counts a..p (texts sharing letters are close). */
function letters(text) {
  const v = new Array(16).fill(0.01)
  for (const c of text) {
    if (c >= 'a' && c <= 'z') v[(c.charCodeAt(0) - 97) % 16] += 1
  }
  return v
}

async function open(t) {
  const mem = await Memory.open()
  t.after(() => mem.close())
  return mem
}

test('a dimension mismatch is INVALID_INPUT naming both dimensions', async (t) => {
  const mem = await open(t)
  await mem.episodic.record('first', { embedding: new Float32Array([1, 0, 0]) })
  await assert.rejects(mem.episodic.record('second', { embedding: [1, 0, 0, 0] }), (e) => {
    assert.ok(e instanceof MemstrataError)
    assert.equal(e.code, 'INVALID_INPUT')
    assert.equal(e.field, 'embedding')
    assert.match(e.message, /embedding has 4 dimensions, context 'default' uses 3/)
    return true
  })
  await rejectsWith(mem.semantic.store('k', 'v', { embedding: [1, 2] }), 'INVALID_INPUT', 'embedding')
  await rejectsWith(mem.episodic.search('first', { embedding: [1] }), 'INVALID_INPUT', 'embedding')
  // Another context fixes its own dimension.
  const other = await mem.namespace('other')
  await other.episodic.record('x', { embedding: new Float64Array(8).fill(0.5) })
  assert.equal((await mem.episodic.recent()).length, 1)
})

test('NaN, infinities, empty, all-zero and out-of-range vectors are refused; nothing is stored', async (t) => {
  const mem = await open(t)
  for (const bad of [[1, NaN], new Float32Array([Infinity, 1]), [], [0, 0], [1e300], new Float64Array([1, NaN])]) {
    await rejectsWith(mem.episodic.record('x', { embedding: bad }), 'INVALID_INPUT', 'embedding')
  }
  assert.deepEqual(await mem.episodic.recent(), [])
  // Not a vector at all: the conversion names the offending element.
  for (const [bad, where] of [['1,2,3', /embedding: expected a Float32Array/], [[1, 'a'], /embedding\[1\]: expected a number/],
    [new Int8Array([1, 2]), /embedding: expected a Float32Array/]]) {
    await assert.rejects(mem.episodic.record('x', { embedding: bad }), (e) => {
      assert.ok(e instanceof MemstrataError)
      assert.equal(e.code, 'INVALID_INPUT')
      assert.match(e.message, where)
      return true
    })
  }
  assert.deepEqual(await mem.episodic.recent(), [])
})

test('hybrid search: ranks in each list, RRF and linear fusion, pure vector search', async (t) => {
  const mem = await open(t)
  const ep = mem.episodic
  const a = await ep.record('apple apple apple orchard', { embedding: [0, 1, 0] })
  const b = await ep.record('banana bread', { embedding: new Float32Array([1, 0, 0]) })
  const c = await ep.record('apple pie with a long list of other words around it', { embedding: [0.6, 0.8, 0] })

  const bm25 = await ep.search('apple')
  assert.deepEqual(bm25.map((h) => h.episode.id), [a, c])
  assert.deepEqual(bm25.map((h) => [h.bm25Rank, h.vectorRank]), [[1, null], [2, null]])

  // RRF, k = 60, weights 1/1: A = 1/61 + 1/63 > C = 2/62 > B = 1/61.
  let hits = await ep.search('apple', {
    embedding: [1, 0, 0], fusion: 'rrf', bm25Weight: 1, vectorWeight: 1, rrfK: 60,
  })
  assert.deepEqual(hits.map((h) => h.episode.id), [a, c, b])
  assert.deepEqual(
    Object.fromEntries(hits.map((h) => [h.episode.id, [h.bm25Rank, h.vectorRank]])),
    { [a]: [1, 3], [b]: [null, 1], [c]: [2, 2] },
  )
  assert.ok(Math.abs(hits[0].score - (1 / 61 + 1 / 63)) < 1e-6, `${hits[0].score}`)

  // Linear: 0.3 BM25 / 0.7 vector; B (cosine 1, no BM25) wins, A (BM25 max, cosine 0) is last.
  hits = await ep.search('apple', { embedding: new Float32Array([1, 0, 0]), fusion: 'linear', bm25Weight: 0.3, vectorWeight: 0.7 })
  assert.equal(hits[0].episode.id, b)
  assert.ok(Math.abs(hits[0].score - 0.7) < 0.01, `${hits[0].score}`)
  assert.equal(hits.at(-1).episode.id, a)
  assert.ok(Math.abs(hits.at(-1).score - 0.3) < 0.01, `${hits.at(-1).score}`)

  // Pure vector search: empty query, score = cosine.
  hits = await ep.search('', { embedding: [1, 0, 0] })
  assert.deepEqual(hits.map((h) => h.episode.id), [b, c, a])
  assert.deepEqual(hits.map((h) => h.vectorRank), [1, 2, 3])
  assert.ok(hits.every((h) => h.bm25Rank === null))
  assert.ok(Math.abs(hits[1].score - 0.6) < 0.01, `${hits[1].score}`)
  hits = await ep.search(undefined, { embedding: [1, 0, 0], limit: 1 })
  assert.deepEqual(hits.map((h) => h.episode.id), [b])

  await rejectsWith(ep.search('apple', { embedding: [1, 0, 0], fusion: 'max' }), 'INVALID_INPUT', 'fusion')
  await rejectsWith(ep.search('apple', { embedding: [1, 0, 0], rrfK: 0 }), 'INVALID_INPUT', 'rrf_k')
  await rejectsWith(ep.search('apple', { embedding: [1, 0, 0], vectorWeight: -1 }), 'INVALID_INPUT', 'vector_weight')
})

test('filters apply to both lists before fusion, so the limit stays exact', async (t) => {
  const mem = await open(t)
  const ep = mem.episodic
  for (let i = 0; i < 100; i++) {
    await ep.record(`walrus walrus ${i}`, { tags: ['drop'], embedding: [1, 0.001 * i, 0] })
  }
  const kept = new Set()
  for (let i = 0; i < 12; i++) {
    kept.add(await ep.record(`walrus note ${i} and more`, { tags: ['keep'], embedding: [0.1, 1, 0.01 * i] }))
  }
  for (const fusion of ['linear', 'rrf']) {
    const hits = await ep.search('walrus', { tags: ['keep'], limit: 10, embedding: [1, 0, 0], fusion })
    assert.equal(hits.length, 10)
    assert.ok(hits.every((h) => kept.has(h.episode.id)), fusion)
    assert.ok(hits.every((h) => h.bm25Rank !== null && h.vectorRank !== null), fusion)
  }
  const pure = await ep.search('', { tags: ['keep'], limit: 10, embedding: [1, 0, 0] })
  assert.equal(pure.length, 10)
  assert.ok(pure.every((h) => kept.has(h.episode.id)))
})

test('semantic: store and query with embeddings', async (t) => {
  const mem = await open(t)
  await mem.semantic.store('fruit', { text: 'apples and pears' }, { embedding: [1, 0] })
  await mem.semantic.store('tools', { text: 'hammers' }, { embedding: new Float32Array([0, 1]) })
  let hits = await mem.semantic.query('', { embedding: [0.9, 0.1] })
  assert.deepEqual(hits.map((h) => h.key), ['fruit', 'tools'])
  assert.deepEqual(hits.map((h) => h.vectorRank), [1, 2])
  hits = await mem.semantic.query('hammers', { embedding: [0.9, 0.1], fusion: 'rrf' })
  assert.deepEqual(
    Object.fromEntries(hits.map((h) => [h.key, [h.bm25Rank, h.vectorRank]])),
    { fruit: [null, 1], tools: [1, 2] },
  )
  hits = await mem.semantic.query('hammers', { limit: 5 })
  assert.deepEqual(hits.map((h) => [h.key, h.bm25Rank, h.vectorRank]), [['tools', 1, null]])
})

for (const kind of ['sync', 'async']) {
  test(`setEmbedder (${kind} function): used on record, store and search`, async (t) => {
    const mem = await open(t)
    const seen = []
    const embed = kind === 'sync'
      ? (texts) => { seen.push([...texts]); return texts.map(letters) }
      : async (texts) => {
        seen.push([...texts])
        await new Promise((resolve) => setTimeout(resolve, 1))
        return texts.map((x) => new Float32Array(letters(x)))
      }
    assert.equal(mem.setEmbedder(embed), undefined)
    const id = await mem.episodic.record('abc abc', { content: { note: 'cab' } })
    await mem.episodic.record('xyz mno')
    await mem.semantic.store('fact', 'abba')
    assert.deepEqual(seen, [['abc abc\nnote cab'], ['xyz mno'], ['fact\nabba']])
    const hits = await mem.episodic.search('bca')
    assert.deepEqual(seen.at(-1), ['bca'])
    assert.equal(hits[0].episode.id, id)
    assert.deepEqual([hits[0].bm25Rank, hits[0].vectorRank], [null, 1])
    assert.equal((await mem.semantic.query('abab'))[0].key, 'fact')
    // An empty query does not call it; an explicit embedding is used as given.
    const n = seen.length
    await mem.episodic.search('')
    await mem.episodic.search('bca', { embedding: letters('xyz') })
    assert.equal(seen.length, n)
    // The hook is per store: a namespace handle uses it too.
    const other = await mem.namespace('other')
    await other.episodic.record('hello')
    assert.deepEqual(seen.at(-1), ['hello'])
    // Concurrent calls each get their own answer.
    const many = await Promise.all(['abc', 'xyz', 'mno'].map((q) => mem.episodic.search(q, { limit: 1 })))
    assert.equal(many.length, 3)
    mem.setEmbedder(null)
    assert.deepEqual(await mem.episodic.search('bca'), [])
  })
}

test('an embedder that throws, rejects or returns garbage fails the call with INVALID_INPUT', async (t) => {
  const mem = await open(t)
  const failsWith = async (promise, pattern) => {
    await assert.rejects(promise, (e) => {
      assert.ok(e instanceof MemstrataError, `${e}`)
      assert.equal(e.code, 'INVALID_INPUT')
      assert.equal(e.field, 'embedder')
      assert.match(e.message, pattern)
      return true
    })
  }
  mem.setEmbedder(() => { throw new Error('model server down') })
  await failsWith(mem.episodic.record('x'), /the embedder threw: .*model server down/)
  await failsWith(mem.episodic.search('x'), /model server down/)
  mem.setEmbedder(async () => { throw new TypeError('quota exceeded') })
  await failsWith(mem.semantic.store('k', 1), /the embedder rejected: .*quota exceeded/)
  mem.setEmbedder(() => Promise.reject(new Error('nope')))
  await failsWith(mem.episodic.record('y'), /nope/)
  mem.setEmbedder(() => 'not vectors')
  await failsWith(mem.episodic.record('x'), /must return an array with one vector/)
  mem.setEmbedder(async () => [['a']])
  await failsWith(mem.episodic.record('x'), /result\[0\]\[0\]: expected a number/)
  mem.setEmbedder(() => [[NaN]])
  await failsWith(mem.semantic.store('k', 1), /finite/)
  mem.setEmbedder(() => [[1], [2]])
  await failsWith(mem.semantic.store('k', 1), /returned 2 vectors for 1 text/)
  assert.deepEqual(await mem.episodic.recent(), [])
  assert.equal(await mem.semantic.get('k'), null)
  // Not a function: refused synchronously, naming the argument.
  assert.throws(() => mem.setEmbedder(42), (e) => {
    assert.ok(e instanceof MemstrataError)
    assert.equal(e.code, 'INVALID_INPUT')
    assert.equal(e.field, 'embedder')
    return true
  })
  // The store still works.
  mem.setEmbedder(null)
  assert.equal(typeof (await mem.episodic.record('fine')), 'string')
})

test('an embedder may itself use the store without deadlocking', async (t) => {
  const mem = await open(t)
  await mem.shortTerm.store('dims', 3)
  mem.setEmbedder(async (texts) => {
    const dims = await mem.shortTerm.retrieve('dims')
    return texts.map((x) => Array.from({ length: dims }, (_, i) => x.length + i + 1))
  })
  const id = await mem.episodic.record('hello')
  const hits = await mem.episodic.search('', { embedding: [6, 7, 8] })
  assert.deepEqual(hits.map((h) => h.episode.id), [id])
  assert.equal((await mem.episodic.search('hello')).length, 1)
})

test('index.d.ts types embeddings, fusion, ranks and the embedder precisely', async () => {
  const { spawnSync } = await import('node:child_process')
  const { mkdirSync, writeFileSync } = await import('node:fs')
  const { join } = await import('node:path')
  const { fileURLToPath } = await import('node:url')
  const pkg = fileURLToPath(new URL('..', import.meta.url))
  const dir = join(pkg, '.example-build')
  mkdirSync(dir, { recursive: true })
  const file = join(dir, 'vectors.mts')
  writeFileSync(file, `
    import { Memory, type Embedder, type EpisodeHit } from 'memstrata'
    const mem = await Memory.open()
    const embed: Embedder = async (texts: string[]) => texts.map(() => new Float32Array(3))
    mem.setEmbedder(embed)
    mem.setEmbedder((texts) => texts.map(() => [1, 2, 3]))
    mem.setEmbedder(null)
    await mem.episodic.record('x', { embedding: new Float32Array([1, 0]) })
    await mem.semantic.store('k', 1, { embedding: [1, 0] })
    const hits: EpisodeHit[] = await mem.episodic.search('', { embedding: [1, 0], fusion: 'rrf', bm25Weight: 1, vectorWeight: 0.2, rrfK: 60 })
    const r: number | null = hits[0].bm25Rank ?? hits[0].vectorRank ?? null
    const k = await mem.semantic.query('', { embedding: [1, 0], fusion: 'linear', limit: 3 })
    const kr: number | null | undefined = k[0].vectorRank
    // Misuse, one error each: an unknown fusion, a string embedding, an embedder returning strings.
    await mem.episodic.search('q', { embedding: [1], fusion: 'max' })
    await mem.episodic.record('x', { embedding: '1,2' })
    mem.setEmbedder((texts: string[]) => texts)
  `)
  const tsc = join(pkg, 'node_modules', 'typescript', 'bin', 'tsc')
  const r = spawnSync(process.execPath, [tsc, '--strict', '--noEmit', '--module', 'node16', '--moduleResolution', 'node16',
    '--target', 'ES2022', '--types', 'node', file], { cwd: pkg, encoding: 'utf8' })
  const lines = r.stdout.split('\n').filter((l) => l.includes('error TS'))
  assert.equal(lines.length, 3, r.stdout)
  assert.ok(lines.every((l) => /vectors\.mts\((1[5-7]),/.test(l)), r.stdout)
})
