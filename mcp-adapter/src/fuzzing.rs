//! The `mcp_tool_args` fuzz contract, shared by the cargo-fuzz target
//! (`fuzz/fuzz_targets/mcp_tool_args.rs`) and the stable replay test
//! (`mcp-adapter/tests/fuzz_inputs.rs`), so both decode inputs and check
//! results the same way. Not part of the public API.
//!
//! Input layout: the first byte picks the tool (index into [`TOOLS`]), the
//! rest is a JSON object of arguments. Ids are minted by the server, so a
//! string argument `"$session_id"`, `"$task_id"`, `"$run_id"` or `"$id"` is
//! replaced by the latest such id a tool returned: inputs can then reach the
//! paths where the session, task, run or episode exists.
//!
//! The contract: every call gives a result or a clean tool error through the
//! dispatcher (`MemoryServer::execute_json`), never a panic, never an
//! internal error, never damage to the store.
//!
//! With authentication on ([`Harness::restricted`]) the caller is whoever an API
//! key authenticates as: a principal that may read everything, write only
//! `default`, `proj*` and `fuzz-*`, and only read engine-wide data. The contract then also
//! says that nothing it may not write changes: sentinel records in the `vault`
//! context (short-term, working memory, an episode, knowledge) are compared after
//! every call, through a full-access principal.

use std::collections::HashMap;

use memstrata::{Limits, Memory};
use serde_json::{Value, json};

use crate::{Access, Auth, Caller, MemoryServer, Principal, Shared};

/// Every tool, in the order fuzz inputs index them: the order of the tool
/// table in `server.rs`. Seeds in `fuzz/seeds/mcp_tool_args/` depend on it:
/// append, never reorder.
pub const TOOLS: &[&str] = crate::server::TOOL_NAMES;

const ID_FIELDS: [&str; 4] = ["session_id", "task_id", "run_id", "id"];

/// What one input did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Not an input of this layout (empty, or the rest is not a JSON object).
    Skipped,
    /// The tool answered with a result.
    Ok(&'static str),
    /// The tool answered with a clean tool error.
    Refused(&'static str),
}

/// The context a restricted caller may read but not write.
pub const VAULT: &str = "vault";
/// The API key the restricted harness authenticates with.
const FUZZ_KEY: &str = "fuzz-api-key-0123456789";

/// One temporary store behind one dispatcher, and the latest ids.
#[derive(Debug)]
pub struct Harness {
    server: MemoryServer,
    who: Principal,
    ids: HashMap<&'static str, String>,
    /// Restricted mode: the sentinels' state, read with full access.
    vault: Option<Value>,
}

fn store() -> Memory {
    Memory::builder()
        .temporary()
        .limits(Limits {
            max_steps: 50,
            ..Limits::default()
        })
        .open()
        .expect("temporary store")
}

impl Harness {
    /// A fresh temporary store (procedures capped at 50 steps), full-access caller.
    pub fn new() -> Self {
        let shared = Shared::new(store(), Auth::disabled(), false).expect("shared state");
        Harness {
            server: MemoryServer::new(shared, "fuzz", Caller::Fixed(Principal::local())),
            who: Principal::local(),
            ids: HashMap::new(),
            vault: None,
        }
    }

    /// A fresh temporary store with authentication on: the caller is what an API
    /// key authenticates as (read `*`, write `default`, `proj*` and `fuzz-*`, global read),
    /// and sentinel records in [`VAULT`] are checked after every call.
    pub async fn restricted() -> Self {
        let limited = Principal::restricted(
            "fuzz-limited",
            &["*"],
            &[memstrata::DEFAULT_CONTEXT, "proj*", "fuzz-*"],
            Access::Read,
        );
        let auth = Auth::disabled().with_key(FUZZ_KEY, limited);
        let shared = Shared::new(store(), auth, true).expect("shared state");
        let who = shared
            .auth
            .authenticate(Some(&format!("Bearer {FUZZ_KEY}")))
            .expect("the fuzz key authenticates");
        let mut h = Harness {
            server: MemoryServer::new(shared, "fuzz", Caller::Fixed(who.clone())),
            who,
            ids: HashMap::new(),
            vault: None,
        };
        let admin = Principal::full("fuzz-admin");
        for (tool, args) in [
            (
                "context_store",
                json!({"key": "sentinel", "value": {"s": 1}, "namespace": VAULT}),
            ),
            (
                "knowledge_store",
                json!({"key": "sentinel", "knowledge": {"s": 2}, "namespace": VAULT}),
            ),
            (
                "episode_record",
                json!({"summary": "vault sentinel", "namespace": VAULT}),
            ),
            (
                "working_focus",
                json!({"item": "sentinel", "namespace": VAULT}),
            ),
        ] {
            match h.server.execute_json(tool, args, &admin).await {
                Some(Ok(_)) => {}
                other => panic!("seeding the vault with {tool}: {other:?}"),
            }
        }
        h.vault = Some(h.vault_state().await.expect("reading the vault"));
        h
    }

    /// Everything in [`VAULT`], read with full access.
    async fn vault_state(&self) -> Result<Value, String> {
        let admin = Principal::full("fuzz-admin");
        let mut out = serde_json::Map::new();
        for (tool, args) in [
            (
                "context_retrieve",
                json!({"key": "sentinel", "namespace": VAULT}),
            ),
            (
                "knowledge_retrieve",
                json!({"key": "sentinel", "namespace": VAULT}),
            ),
            (
                "episode_search",
                json!({"query": "", "limit": 100, "namespace": VAULT}),
            ),
            ("working_get", json!({"namespace": VAULT})),
        ] {
            match self.server.execute_json(tool, args, &admin).await {
                // Hits carry scores that move with the rest of the index: compare ids.
                Some(Ok(v)) if tool == "episode_search" => {
                    let ids: Vec<Value> = v["hits"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|h| h["episode"]["id"].clone())
                        .collect();
                    out.insert(tool.to_owned(), Value::Array(ids));
                }
                Some(Ok(v)) => {
                    out.insert(tool.to_owned(), v);
                }
                other => return Err(format!("reading the vault with {tool}: {other:?}")),
            }
        }
        Ok(Value::Object(out))
    }

    /// Run one input. `Err` names a broken contract: an undispatched tool, a
    /// non-object result, or an internal/storage/index/corruption error.
    pub async fn run(&mut self, data: &[u8]) -> Result<Outcome, String> {
        let Some((&pick, json)) = data.split_first() else {
            return Ok(Outcome::Skipped);
        };
        let Ok(mut args @ Value::Object(_)) = serde_json::from_slice::<Value>(json) else {
            return Ok(Outcome::Skipped);
        };
        let tool = TOOLS[usize::from(pick) % TOOLS.len()];
        substitute(&mut args, &self.ids);
        let outcome = match self.server.execute_json(tool, args, &self.who).await {
            None => Err(format!("tool {tool} is not dispatched")),
            // Tool results travel as `structuredContent`, which must be an object.
            Some(Ok(result)) if !result.is_object() => {
                Err(format!("{tool} returned a non-object result: {result}"))
            }
            Some(Ok(result)) => {
                for f in ID_FIELDS {
                    if let Some(id) = result.get(f).and_then(Value::as_str) {
                        self.ids.insert(f, id.to_owned());
                    }
                }
                Ok(Outcome::Ok(tool))
            }
            Some(Err(err))
                if matches!(err.code(), "INTERNAL" | "CORRUPTED" | "STORAGE" | "INDEX") =>
            {
                Err(format!("{tool}: {} ({})", err.message(), err.code()))
            }
            Some(Err(_)) => Ok(Outcome::Refused(tool)),
        };
        if let (Ok(_), Some(before)) = (&outcome, &self.vault) {
            let now = self.vault_state().await?;
            if &now != before {
                return Err(format!(
                    "{tool} as a caller without write access to {VAULT:?} changed it: {before} -> {now}"
                ));
            }
        }
        outcome
    }
}

impl Default for Harness {
    fn default() -> Self {
        Self::new()
    }
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
