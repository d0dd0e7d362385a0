// ESM entry point of the `memstrata` package: the CommonJS module's exports, by name.
// Written by scripts/build-dev.mjs from the native module's exports (kept in git).
import memstrata from './index.js'

export const {
  DEFAULT_CONTEXT,
  EXPORT_FORMAT_VERSION,
  Episodic,
  FORMAT_VERSION,
  MAX_COMPRESSION_LEVEL,
  ManualClock,
  Memory,
  MemstrataError,
  Procedural,
  ProgressStage,
  SUMMARY_MAX_CHARS,
  Semantic,
  ShortTerm,
  Working,
  _panicForTests,
  builtinActions,
  coreVersion,
} = memstrata
export default memstrata
