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

use std::collections::HashMap;

use memstrata::{Limits, Memory};
use serde_json::Value;

use crate::{Auth, Caller, MemoryServer, Principal, Shared};

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

/// One temporary store behind one full-access dispatcher, and the latest ids.
#[derive(Debug)]
pub struct Harness {
    server: MemoryServer,
    who: Principal,
    ids: HashMap<&'static str, String>,
}

impl Harness {
    /// A fresh temporary store (procedures capped at 50 steps).
    pub fn new() -> Self {
        let mem = Memory::builder()
            .temporary()
            .limits(Limits {
                max_steps: 50,
                ..Limits::default()
            })
            .open()
            .expect("temporary store");
        let shared = Shared::new(mem, Auth::disabled(), false).expect("shared state");
        Harness {
            server: MemoryServer::new(shared, "fuzz", Caller::Fixed(Principal::local())),
            who: Principal::local(),
            ids: HashMap::new(),
        }
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
        match self.server.execute_json(tool, args, &self.who).await {
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
        }
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
