#![no_main]
//! MCP tool arguments: any JSON object given to any tool (the first byte picks
//! the tool) must give a result or a clean tool error through the adapter's
//! dispatcher (`MemoryServer::execute_json`, what `/mcp/v1/execute` and the
//! tool router run): never a panic, never an internal error, never damage
//! the store (a later call that reads it must not see `CORRUPTED`).
//!
//! Ids are minted by the server, so a string argument `"$session_id"`,
//! `"$task_id"`, `"$run_id"` or `"$id"` is replaced by the latest such id a
//! tool returned: inputs can then reach the paths where the session, task,
//! run or episode exists.
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use memstrata::{Limits, Memory};
use memstrata_mcp::{Auth, Caller, MemoryServer, Principal, Shared};
use serde_json::Value;

/// Every tool, as listed by tools/list.
const TOOLS: [&str; 29] = [
    "context_retrieve",
    "context_store",
    "context_switch",
    "episode_get",
    "episode_record",
    "episode_search",
    "episodes_summarize",
    "knowledge_query",
    "knowledge_retrieve",
    "knowledge_store",
    "knowledge_update",
    "llm_punch_in",
    "llm_punch_out",
    "memory_forget",
    "memory_optimize",
    "memory_retrieve",
    "memory_store",
    "procedure_execute",
    "procedure_learn",
    "procedure_list",
    "procedure_resume",
    "procedure_update",
    "session_create",
    "session_restore",
    "session_save",
    "system_status",
    "working_focus",
    "working_get",
    "workspace_add",
];

const ID_FIELDS: [&str; 4] = ["session_id", "task_id", "run_id", "id"];

struct Env {
    rt: tokio::runtime::Runtime,
    server: MemoryServer,
    who: Principal,
    /// Latest id of each kind returned by a tool.
    ids: Mutex<HashMap<&'static str, String>>,
}

/// Replace `"$<field>"` strings (anywhere in `v`) with the latest id of that kind.
fn substitute(v: &mut Value, ids: &HashMap<&'static str, String>) {
    match v {
        Value::String(s) => {
            if let Some(id) = s.strip_prefix('$').and_then(|f| ids.get(f)) {
                *s = id.clone();
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| substitute(x, ids)),
        Value::Object(o) => o.values_mut().for_each(|x| substitute(x, ids)),
        _ => {}
    }
}

fn env() -> &'static Env {
    static ENV: OnceLock<Env> = OnceLock::new();
    ENV.get_or_init(|| {
        let mem = Memory::builder()
            .temporary()
            .limits(Limits {
                max_steps: 50,
                ..Limits::default()
            })
            .open()
            .expect("temporary store");
        let shared = Shared::new(mem, Auth::disabled(), false).expect("shared state");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("tokio runtime");
        Env {
            rt,
            server: MemoryServer::new(shared, "fuzz", Caller::Fixed(Principal::local())),
            who: Principal::local(),
            ids: Mutex::new(HashMap::new()),
        }
    })
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Some((&pick, json)) = data.split_first() else {
        return;
    };
    let Ok(mut args @ Value::Object(_)) = serde_json::from_slice::<Value>(json) else {
        return;
    };
    let tool = TOOLS[usize::from(pick) % TOOLS.len()];
    let e = env();
    substitute(&mut args, &e.ids.lock().unwrap());
    match e.rt.block_on(e.server.execute_json(tool, args, &e.who)) {
        None => panic!("tool {tool} is not dispatched"),
        Some(Ok(result)) => {
            // Tool results travel as `structuredContent`, which must be an object.
            assert!(
                result.is_object(),
                "{tool} returned a non-object result: {result}"
            );
            let mut ids = e.ids.lock().unwrap();
            for f in ID_FIELDS {
                if let Some(id) = result.get(f).and_then(Value::as_str) {
                    ids.insert(f, id.to_owned());
                }
            }
        }
        Some(Err(err)) => {
            let code = err.code();
            assert!(
                !matches!(code, "INTERNAL" | "CORRUPTED" | "STORAGE" | "INDEX"),
                "{tool}: {}",
                err.message()
            );
        }
    }
});
