//! Memstrata benchmark harness.
//!
//! One binary (`compare`, run by `make bench` through `scripts/bench.sh`)
//! measures Memstrata side by side with the floor it is built on (raw sled,
//! raw tantivy) and with what a developer would pick instead (SQLite FTS5),
//! on a deterministic synthetic agent history ([`corpus`]), and prints the
//! markdown under `target/bench/` (summarised into `docs/benchmarks.md` by `benches/summary.py`). Each engine implements one
//! small trait ([`engines::KvEngine`], [`engines::SearchEngine`]); the rival
//! engines are dependencies of this crate only.
//!
//! Nothing here asserts on time: the tests check the corpus is deterministic
//! and the engines agree on what they store and find.

pub mod corpus;
pub mod engines;
pub mod mixed;
pub mod stats;
pub mod sys;
