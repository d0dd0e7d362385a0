#![no_main]
//! MCP tool arguments: any JSON object given to any tool (the first byte picks
//! the tool) must give a result or a clean tool error through the adapter's
//! dispatcher (`MemoryServer::execute_json`, what `/mcp/v1/execute` and the
//! tool router run): never a panic, never an internal error, never damage
//! the store (a later call that reads it must not see `CORRUPTED`).
//!
//! Each input runs twice: as a full-access caller, and with authentication on as
//! a caller whose API key may write only `default`, `proj*` and `fuzz-*` (global read
//! only); then nothing in the `vault` context may change.
//!
//! The input layout, the `"$session_id"`-style id substitution and the checks
//! live in `memstrata_mcp::fuzzing`, shared with the replay test
//! `mcp-adapter/tests/fuzz_inputs.rs`.
use std::sync::{Mutex, OnceLock};

use memstrata_mcp::fuzzing::Harness;

struct Env {
    rt: tokio::runtime::Runtime,
    harness: Mutex<Harness>,
    restricted: Mutex<Harness>,
}

fn env() -> &'static Env {
    static ENV: OnceLock<Env> = OnceLock::new();
    ENV.get_or_init(|| {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("tokio runtime");
        // The store's background work needs no runtime; the harness is built outside it.
        let restricted = rt.block_on(Harness::restricted());
        Env {
            rt,
            harness: Mutex::new(Harness::new()),
            restricted: Mutex::new(restricted),
        }
    })
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let e = env();
    let mut h = e.harness.lock().unwrap();
    if let Err(broken) = e.rt.block_on(h.run(data)) {
        panic!("{broken}");
    }
    let mut r = e.restricted.lock().unwrap();
    if let Err(broken) = e.rt.block_on(r.run(data)) {
        panic!("with a restricted key: {broken}");
    }
});
