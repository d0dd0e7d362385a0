//! Model-based tests for the layers `model.rs` does not cover: episodes,
//! working memory, sessions (with retention pruning) and procedures. Each test
//! runs random operation sequences (with clock moves and reopens of the same
//! store) against a small in-memory model of the documented behaviour.

#[path = "../common/mod.rs"]
mod common;

mod episodes;
mod procedures;
mod sessions;
mod working;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use memstrata::{
    Durability, Error, Limits, ManualClock, Memory, NewEpisode, SearchFilters,
    admin::OptimizeLevel, procedural::Actions, procedural::Branch, procedural::Next,
    procedural::RunStatus, procedural::Step,
};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

fn start() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 1, 0, 0, 0).unwrap()
}

fn open(path: &Path, clock: &Arc<ManualClock>, limits: &Limits, retention: usize) -> Memory {
    Memory::builder()
        .path(path)
        .durability(Durability::Manual)
        .clock(clock.clone())
        .limits(limits.clone())
        .session_retention(retention)
        .open()
        .unwrap()
}

fn ctx_name(c: u8) -> &'static str {
    if c == 0 { "default" } else { "other" }
}

fn is_not_found<T: std::fmt::Debug>(r: &memstrata::Result<T>) -> bool {
    matches!(r, Err(Error::NotFound { .. }))
}

/// The names selected by the low bits of `mask`.
fn pick_names(mask: u8, names: &[&str]) -> Vec<String> {
    names
        .iter()
        .enumerate()
        .filter(|(i, _)| mask & (1 << i) != 0)
        .map(|(_, n)| (*n).to_owned())
        .collect()
}

/// A well-formed id that no record has.
const MISSING_ID: &str = "00000000-0000-7000-8000-000000000000";
