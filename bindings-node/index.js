'use strict'
// The `memstrata` package entry point (CommonJS; index.mjs re-exports it for ESM).
//
// binding.js is napi-rs's generated loader for the native module. This file adds
// what a Rust addon cannot declare: the `MemstrataError` class (a JS class that
// extends Error), and one wrapper around every method of the native classes so
// that each failure reaches the caller as a MemstrataError with a `code`, and a
// method that returns a Promise never throws synchronously (a wrong argument type
// rejects its Promise with INVALID_INPUT instead).
const native = require('./binding.js')

const CODES = new Set([
  'NOT_FOUND', 'INVALID_INPUT', 'LIMIT_EXCEEDED', 'STORE_LOCKED', 'CORRUPTED', 'IO',
  'STORAGE', 'INDEX', 'PROCEDURE', 'CONFLICT', 'FORKED', 'CLOSED', 'INTERNAL',
])

// Statuses napi-rs reports when an argument cannot be converted to its Rust type.
const ARGUMENT_STATUSES = new Set([
  'InvalidArg', 'ObjectExpected', 'StringExpected', 'NameExpected', 'FunctionExpected',
  'NumberExpected', 'BooleanExpected', 'ArrayExpected', 'BigintExpected', 'DateExpected',
  'ArrayBufferExpected', 'DetachableArraybufferExpected', 'PendingException',
])

class MemstrataError extends Error {
  constructor(message, code, field = null, options = undefined) {
    super(message, options)
    this.code = code
    this.field = field
  }
}
Object.defineProperty(MemstrataError.prototype, 'name', {
  value: 'MemstrataError', writable: true, configurable: true, enumerable: false,
})

/** Any failure of a native call, as a MemstrataError. */
function toMemstrataError(e) {
  if (e instanceof MemstrataError) return e
  if (e instanceof Error && CODES.has(e.code)) {
    // Created by the native module (bindings-node/src/error.rs) with `code` and `field`.
    Object.setPrototypeOf(e, MemstrataError.prototype)
    if (e.field === undefined) e.field = null
    return e
  }
  const message = e instanceof Error ? e.message : String(e)
  const status = e instanceof Error ? e.code : undefined
  // napi's argument conversion failures, or an exception a getter / proxy of an
  // argument threw while it was read: the argument is at fault.
  const code = status === undefined || ARGUMENT_STATUSES.has(status) ? 'INVALID_INPUT' : 'INTERNAL'
  return new MemstrataError(message, code, null, { cause: e })
}

// Methods that do not return a Promise (everything else does).
const SYNC_METHODS = new Set([
  'ManualClock.advance', 'ManualClock.set', 'ManualClock.now', '.coreVersion', '.builtinActions',
  'Memory.setEmbedder',
])

function wrapMethod(owner, name, fn) {
  const sync = SYNC_METHODS.has(`${owner}.${name}`)
  const wrapped = {
    [name](...args) {
      let result
      try {
        result = fn.apply(this, args)
      } catch (e) {
        if (sync) throw toMemstrataError(e)
        return Promise.reject(toMemstrataError(e))
      }
      if (result instanceof Promise) {
        return result.then(undefined, (e) => {
          throw toMemstrataError(e)
        })
      }
      return result
    },
  }[name]
  return wrapped
}

function wrapGetter(get) {
  return function () {
    try {
      return get.call(this)
    } catch (e) {
      throw toMemstrataError(e)
    }
  }
}

function wrapClass(cls) {
  for (const [target, owner] of [[cls.prototype, cls.name], [cls, cls.name]]) {
    for (const key of Object.getOwnPropertyNames(target)) {
      if (key === 'constructor' || key === 'prototype' || key === 'length' || key === 'name') continue
      const d = Object.getOwnPropertyDescriptor(target, key)
      if (typeof d.value === 'function') {
        Object.defineProperty(target, key, { ...d, value: wrapMethod(owner, key, d.value) })
      } else if (typeof d.get === 'function') {
        Object.defineProperty(target, key, { ...d, get: wrapGetter(d.get) })
      }
    }
  }
}

const exported = { ...native, MemstrataError }
for (const [name, value] of Object.entries(native)) {
  if (typeof value !== 'function') continue
  if (/^[A-Z]/.test(name)) wrapClass(value)
  else exported[name] = wrapMethod('', name, value)
}

module.exports = exported
