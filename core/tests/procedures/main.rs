//! Procedural memory: learning, validation, execution, built-ins, host actions,
//! pause/resume across a reopen, and the episode every finished run leaves.

#[path = "../common/mod.rs"]
mod common;

mod execution;
mod graphs;
mod pause;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use memstrata::procedural::steps_from_json;
use memstrata::{
    Error, Limits, Memory, SearchFilters, procedural::ActionHandler, procedural::Actions,
    procedural::Next, procedural::RunStatus, procedural::Step,
};
use serde_json::{Value, json};

fn store() -> (common::TestDir, Memory) {
    let dir = common::tempdir();
    let mem = Memory::builder().path(dir.path()).open().unwrap();
    (dir, mem)
}

fn store_with(limits: Limits) -> (common::TestDir, Memory) {
    let dir = common::tempdir();
    let mem = Memory::builder()
        .path(dir.path())
        .limits(limits)
        .open()
        .unwrap();
    (dir, mem)
}

/// Open `path` again (every handle of the previous engine is gone, so the
/// store is released).
fn reopen(path: &Path) -> Memory {
    Memory::builder().path(path).open().unwrap()
}

fn action<F>(f: F) -> Arc<dyn ActionHandler>
where
    F: Fn(&Value) -> Result<Value, String> + Send + Sync + 'static,
{
    Arc::new(f)
}

fn no_actions() -> Actions {
    Actions::new()
}

fn invalid(r: memstrata::Result<impl std::fmt::Debug>) -> (String, String) {
    match r {
        Err(Error::InvalidInput { field, reason }) => (field, reason),
        other => panic!("expected InvalidInput, got {other:?}"),
    }
}

fn step_ids(run: &memstrata::procedural::Run) -> Vec<&str> {
    run.trace.iter().map(|t| t.step.as_str()).collect()
}

fn triage_steps() -> Vec<Step> {
    vec![
        Step::new("start", "set")
            .parameters(json!({"severity": "{{ params.severity }}", "n": "{{ params.count * 2 }}"}))
            .branch("last.severity == 'high'", "page")
            .branch("steps.start.output.n > 5 && params.service != ''", "batch"),
        Step::new("page", "set")
            .parameters(json!({"msg": "paging on-call for {{ params.service }}"})),
        Step::new("batch", "set")
            .parameters(json!({"msg": "queued {{ steps.start.output.n }} items"})),
    ]
}
