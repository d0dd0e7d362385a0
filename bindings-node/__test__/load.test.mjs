// The package loads from ESM and CommonJS and exposes the same objects both ways.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { createRequire } from 'node:module'

import * as esm from '../index.mjs'

const require = createRequire(import.meta.url)
const cjs = require('../index.js')

test('ESM exports every CommonJS export, the same objects', () => {
  const names = Object.keys(cjs).filter((k) => k !== '__napiBindingTarget').sort()
  const esmNames = Object.keys(esm).filter((k) => k !== 'default').sort()
  assert.deepEqual(esmNames, names)
  for (const n of names) assert.equal(esm[n], cjs[n], n)
  assert.equal(esm.default, cjs)
})

test('MemstrataError is an Error with a code and a field', () => {
  const e = new cjs.MemstrataError('bad key', 'INVALID_INPUT', 'key')
  assert.ok(e instanceof Error)
  assert.ok(e instanceof cjs.MemstrataError)
  assert.equal(e.name, 'MemstrataError')
  assert.equal(e.code, 'INVALID_INPUT')
  assert.equal(e.field, 'key')
  assert.equal(e.message, 'bad key')
  assert.equal(new cjs.MemstrataError('x', 'IO').field, null)
})
