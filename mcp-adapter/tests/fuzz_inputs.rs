//! Replays the inputs of the `mcp_tool_args` fuzz target (`fuzz/seeds/mcp_tool_args/`
//! and any crash inputs kept in `fuzz/regressions/mcp_tool_args/`) through the same
//! dispatcher with the same checks, so the target's contract holds on every test run,
//! without a nightly toolchain. Input layout: the first byte picks the tool, the rest
//! is a JSON object of arguments; `"$session_id"`-style strings become the latest id
//! of that kind a tool returned.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use memstrata::{Limits, Memory};
use memstrata_mcp::{Auth, Caller, MemoryServer, Principal, Shared};

/// Every tool, in the order the fuzz target indexes them.
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

/// Files of `dir`, sorted by name (none when the directory does not exist).
fn inputs(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = rd.map(|e| e.unwrap().path()).filter(|p| p.is_file()).collect();
    files.sort();
    files
}

#[tokio::test]
async fn mcp_tool_args_fuzz_inputs_stay_fixed() {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz");
    let seeds = inputs(&fuzz.join("seeds/mcp_tool_args"));
    let crashes = inputs(&fuzz.join("regressions/mcp_tool_args"));
    assert!(
        seeds.len() >= TOOLS.len(),
        "fuzz/seeds/mcp_tool_args holds a seed per tool"
    );

    // The fuzz target's environment: one temporary store, a full-access caller.
    let mem = Memory::builder()
        .temporary()
        .limits(Limits {
            max_steps: 50,
            ..Limits::default()
        })
        .open()
        .unwrap();
    let shared: Arc<Shared> = Shared::new(mem, Auth::disabled(), false).unwrap();
    let server = MemoryServer::new(shared, "fuzz", Caller::Fixed(Principal::local()));
    let who = Principal::local();
    let mut ids: HashMap<&'static str, String> = HashMap::new();
    let mut ok = 0;
    let mut tools_run = std::collections::BTreeSet::new();
    for path in seeds.iter().chain(&crashes) {
        let data = std::fs::read(path).unwrap();
        let Some((&pick, json)) = data.split_first() else {
            continue;
        };
        let Ok(mut args @ Value::Object(_)) = serde_json::from_slice::<Value>(json) else {
            continue;
        };
        let tool = TOOLS[usize::from(pick) % TOOLS.len()];
        tools_run.insert(tool);
        substitute(&mut args, &ids);
        match server.execute_json(tool, args, &who).await {
            None => panic!("{}: tool {tool} is not dispatched", path.display()),
            Some(Ok(result)) => {
                assert!(result.is_object(), "{}: {tool} returned {result}", path.display());
                for f in ID_FIELDS {
                    if let Some(id) = result.get(f).and_then(Value::as_str) {
                        ids.insert(f, id.to_owned());
                    }
                }
                ok += 1;
            }
            Some(Err(err)) => assert!(
                !matches!(err.code(), "INTERNAL" | "CORRUPTED" | "STORAGE" | "INDEX"),
                "{}: {tool}: {}",
                path.display(),
                err.message()
            ),
        }
    }
    // Every tool was exercised, and the seeds (valid calls, in name order) mostly succeed:
    // sessions, tasks and runs created by earlier seeds are found by later ones.
    assert_eq!(tools_run.len(), TOOLS.len());
    assert!(
        ok * 4 >= seeds.len() * 3,
        "only {ok} of {} seeds succeeded",
        seeds.len()
    );
}
