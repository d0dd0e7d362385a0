// ESM entry point of the `memstrata` package: the CommonJS module's exports, by name.
import memstrata from './index.js'

export const {
  MemstrataError,
  coreVersion,
} = memstrata
export default memstrata
