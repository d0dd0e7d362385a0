// The TypeScript example of the README (an ES module: top-level await): type-checked with `tsc --strict --noEmit`
// and run by __test__/readme.test.mjs.
import { Memory, MemstrataError, type JsonValue } from 'memstrata'

const mem = await Memory.open('agent.mem', { durability: 'immediate' })
try {
  await mem.shortTerm.store('draft', { text: '...' }, { ttl: 300 })
  await mem.episodic.record('Deployed v2 to staging', { participants: ['alice'], tags: ['deploy'], importance: 7 })
  const [hit] = await mem.episodic.search('staging deploy', { limit: 10 })
  console.log(hit.episode.summary, hit.score)
  await mem.semantic.store('user:alice', { role: 'admin' })
  await mem.semantic.update('user:alice', { team: 'infra' }) // RFC 7386 merge patch
  const s = await mem.sessionCreate('refactor', { metadata: { repo: 'x' } })
  await mem.sessionSave(s.sessionId, { step: 3 }, { compressionLevel: 2 })
  console.log((await mem.sessionRestore(s.sessionId)).content)

  await mem.procedural.learn('triage', [
    { id: 'lookup', action: 'lookup', parameters: { user: '{{ params.user }}' }, next: 'save' },
    { id: 'save', action: 'semantic.store', parameters: { key: 'triage:{{ params.user }}', knowledge: '{{ last }}' } },
  ])
  const run = await mem.procedural.execute('triage', { user: 'bob' }, {
    actions: { lookup: async (params: JsonValue) => ({ severity: 5, params }) },
  })
  console.log(run.status, run.outputs)
} catch (e) {
  if (e instanceof MemstrataError) console.error(e.code, e.field, e.message)
  throw e
} finally {
  await mem.close()
}
