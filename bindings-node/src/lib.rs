//! Node/TypeScript binding of Memstrata (npm package `memstrata`).
//!
//! Glue over `memstrata-bindings-common`: one file per core module, the error choke
//! point in `error.rs`, the Promise runner in `task.rs` and the JS callbacks (host
//! actions, progress) in `callbacks.rs`. Every storage call returns a Promise and runs
//! on napi's tokio blocking pool, never on the JS thread. `index.js` (the package
//! entry) adds the `MemstrataError` class and turns every failure into one.

mod callbacks;
mod clock;
mod contexts;
mod episodic;
mod error;
mod export;
mod memory;
mod procedural;
mod semantic;
mod sessions;
mod short_term;
mod status;
mod task;
mod timesheet;
mod working;

use napi::bindgen_prelude::*;
use napi_derive::napi;

/// The version of this binding (and of the engine it embeds).
#[napi]
pub fn core_version() -> String {
    env!("CARGO_PKG_VERSION").to_owned()
}

/// The context a store starts in (`"default"`).
#[napi]
pub const DEFAULT_CONTEXT: &str = memstrata::DEFAULT_CONTEXT;

/// On-disk format version of the store.
#[napi]
pub const FORMAT_VERSION: u32 = memstrata::FORMAT_VERSION;

/// Version of the JSON Lines export format.
#[napi]
pub const EXPORT_FORMAT_VERSION: u32 = memstrata::admin::EXPORT_FORMAT_VERSION;

/// Highest `compressionLevel` of `sessionSave` (0: none, 1: lz4, 2: lz4 high, 3: + delta).
#[napi]
pub const MAX_COMPRESSION_LEVEL: u32 = memstrata::sessions::MAX_COMPRESSION_LEVEL as u32;

/// Longest episode summary, in characters.
#[napi]
pub const SUMMARY_MAX_CHARS: u32 = memstrata::episodic::SUMMARY_MAX_CHARS as u32;

/// The built-in procedure actions (reserved names: `registerAction` refuses them).
#[napi]
pub fn builtin_actions() -> Vec<String> {
    memstrata::procedural::BUILTIN_ACTIONS
        .iter()
        .map(|s| (*s).to_owned())
        .collect()
}

/// Test hook: panics inside the engine call path (`sync`: on the JS thread; else on
/// the worker pool). The panic must come back as `MemstrataError` with code
/// `INTERNAL`, and the process must stay up.
#[napi(js_name = "_panicForTests", ts_return_type = "Promise<void>")]
pub fn panic_for_tests(env: &Env, sync: Option<bool>) -> Result<PromiseRaw<'_, ()>> {
    if sync == Some(true) {
        return Err(error::to_napi(
            env,
            memstrata_bindings_common::guard(|| -> memstrata::Result<()> {
                panic!("panic requested by _panicForTests")
            })
            .unwrap_err(),
        ));
    }
    task::spawn(env, || -> std::result::Result<(), _> {
        panic!("panic requested by _panicForTests")
    })
}
