//! Continuity features on real stores: sessions, contexts, timesheet, status, optimize,
//! export / import.

#[path = "../common/mod.rs"]
mod common;

mod contexts;
mod export;
mod sessions;
mod status;
mod timesheet;

use std::fs::File;
use std::io::{BufReader, Cursor};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use memstrata::{
    Error, ManualClock, Memory, MemoryBuilder, NewEpisode, SearchFilters, admin::Health,
    admin::OptimizeLevel, procedural::Actions, procedural::RunStatus, procedural::Step,
    timesheet::TaskFilter, timesheet::TaskStatus, timesheet::TaskStatusFilter,
};
use serde_json::{Value, json};

fn builder(dir: &Path) -> (MemoryBuilder, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::starting_now());
    (
        Memory::builder()
            .path(common::store_under(dir, "store"))
            .clock(clock.clone()),
        clock,
    )
}

fn open(dir: &Path) -> (Memory, Arc<ManualClock>) {
    let (b, clock) = builder(dir);
    (b.open().unwrap(), clock)
}

/// A realistic, growing agent state for save number `i`.
fn agent_state(i: usize) -> Value {
    let messages: Vec<Value> = (0..(i * 3 + 1))
        .map(|m| {
            let role = ["user", "assistant", "tool"][m % 3];
            json!({
                "role": role,
                "content": format!("message {m}: the index commit for segment {} failed after retry {}; check the writer lock", m * 7 % 13, m % 4),
                "tokens": 40 + m * 3,
                "score": (m as f64) / 8.0,
            })
        })
        .collect();
    json!({
        "agent": {"name": "claude", "temperature": 0.2},
        "messages": messages,
        "state": {"step": i, "done": i.is_multiple_of(2), "files": ["src/lib.rs", format!("src/mod{}.rs", i % 5)], "neg": -(i as i64), "big": u64::MAX, "unicode": "héllo 🦀"},
        "empty": {"list": [], "map": {}, "null": null},
    })
}

fn export_lines(mem: &Memory) -> Vec<String> {
    let mut out = Vec::new();
    mem.admin().export(&mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    // Skip the header (it carries `exported_at`).
    text.lines().skip(1).map(str::to_owned).collect()
}

fn is_invalid(err: &Error, needle: &str) -> bool {
    matches!(err, Error::InvalidInput { .. }) && err.to_string().contains(needle)
}

fn clock_now(clock: &ManualClock) -> chrono::DateTime<chrono::Utc> {
    use memstrata::Clock;
    clock.now()
}
