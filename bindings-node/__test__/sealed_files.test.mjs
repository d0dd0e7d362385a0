// Encryption at rest through the Node binding: distinctive words written through
// every layer (record keys included) are in no file of an encrypted store, and
// are in a plaintext one (the control). The core runs the full check
// (core/tests/sealed_keys.rs); this shows a store written from Node passes it too.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'

import { Memory } from '../index.mjs'
import { tempDir } from './helpers.mjs'

const CONTEXT = 'CtxJsQuokka'
const WORDS = {
  context: CONTEXT,
  summary: 'JsSummaryNarwhal',
  content: 'JsContentOcelot',
  participant: 'JsParticipantPangolin',
  tag: 'JsTagWombat',
  knowledgeKey: 'JsKeyAxolotl',
  knowledgeValue: 'JsValueCapybara',
  shortKey: 'JsStKeyTapir',
  shortValue: 'JsStValueMarmot',
  session: 'JsSessionLemur',
  procedure: 'JsProcGecko',
}

async function writeWords(mem) {
  const w = WORDS
  await mem.switchContext(CONTEXT)
  await mem.episodic.record(`meeting ${w.summary}`, {
    content: { detail: w.content },
    participants: [w.participant],
    tags: [w.tag],
  })
  await mem.semantic.store(`user:${w.knowledgeKey}`, { text: w.knowledgeValue })
  await mem.shortTerm.store(w.shortKey, { note: w.shortValue })
  await mem.procedural.learn(w.procedure, [{ id: 'a', action: 'set', parameters: { x: 1 } }])
  const { sessionId } = await mem.sessionCreate('s')
  await mem.sessionSave(sessionId, { state: w.session })
  return sessionId
}

async function checkWords(mem, sessionId) {
  const w = WORDS
  assert.ok((await mem.contexts()).includes(CONTEXT))
  await mem.switchContext(CONTEXT)
  assert.deepEqual(await mem.semantic.keys({ prefix: 'user:' }), [`user:${w.knowledgeKey}`])
  assert.deepEqual(await mem.shortTerm.keys({ prefix: 'JsSt' }), [w.shortKey])
  assert.deepEqual(await mem.procedural.list(), [w.procedure])
  const hits = await mem.episodic.search(w.summary)
  assert.deepEqual(hits.map((h) => h.episode.participants), [[w.participant]])
  assert.deepEqual((await mem.sessionRestore(sessionId)).content, { state: w.session })
}

/** Every file under `root`, recursively, as bytes. */
function files(root) {
  return readdirSync(root, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => readFileSync(join(e.parentPath ?? e.path, e.name)))
}

/** The names of the words found (as written or lower-cased) in any file under `root`. */
function foundWords(root) {
  const blobs = files(root)
  return Object.entries(WORDS)
    .filter(([, word]) => [word, word.toLowerCase()].some((form) => blobs.some((b) => b.includes(form))))
    .map(([name]) => name)
    .sort()
}

test('no word of any layer is in the files of an encrypted store', async (t) => {
  const dir = tempDir(t)
  const plain = join(dir, 'plain.mem')
  let mem = await Memory.open(plain)
  let sid = await writeWords(mem)
  await checkWords(mem, sid)
  await mem.close()
  assert.deepEqual(foundWords(plain), Object.keys(WORDS).sort(), 'control: every word is in a plaintext store')

  const sealed = join(dir, 'sealed.mem')
  const key = Buffer.from(Array.from({ length: 32 }, (_, i) => i + 1))
  mem = await Memory.open(sealed, { encryptionKey: key })
  sid = await writeWords(mem)
  await checkWords(mem, sid)
  await mem.close()
  assert.deepEqual(foundWords(sealed), [])

  mem = await Memory.open(sealed, { encryptionKey: key })
  await checkWords(mem, sid)
  await mem.close()
})
