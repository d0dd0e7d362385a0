//! Session save / restore at each compression level.

use std::path::Path;
use std::time::Instant;

use memstrata_benches::corpus::Corpus;
use memstrata_benches::engines::{Result, memstrata_engine};
use memstrata_benches::stats::Latency;

use crate::progress::{phase, tick};

/// Versions saved per level.
pub(crate) const SESSION_VERSIONS: usize = 40;
/// JSON size of version 1 and growth per version (an agent checkpointing a growing transcript).
pub(crate) const SESSION_BASE_BYTES: usize = 16 * 1024;
const SESSION_STEP_BYTES: usize = 2 * 1024;

#[derive(Debug)]
pub(crate) struct SessionLevel {
    pub(crate) level: u8,
    pub(crate) raw: u64,
    pub(crate) stored: u64,
    pub(crate) last_raw: u64,
    pub(crate) last_stored: u64,
    pub(crate) save: Latency,
    pub(crate) restore: Latency,
    pub(crate) save_ns: f64,
    pub(crate) restore_ns: f64,
}

#[derive(Debug)]
pub(crate) struct SessionResult {
    pub(crate) levels: Vec<SessionLevel>,
    pub(crate) json_bytes_last: usize,
}

pub(crate) fn sessions_bench(corpus: &Corpus, dir: &Path) -> Result<SessionResult> {
    phase("sessions: save/restore per compression level".into());
    let root = tempfile::Builder::new()
        .prefix("memstrata-bench-sessions-")
        .tempdir_in(dir)?;
    let mem = memstrata_engine::open(root.path())?;
    let contents: Vec<serde_json::Value> = (1..=SESSION_VERSIONS)
        .map(|v| corpus.session_content(v, SESSION_BASE_BYTES + v * SESSION_STEP_BYTES))
        .collect();
    let json_bytes_last = contents.last().map_or(0, |c| c.to_string().len());
    let mut levels = Vec::new();
    let mut ids = Vec::new();
    for level in 0..=3u8 {
        ids.push(
            mem.sessions()
                .create(
                    &format!("level-{level}"),
                    serde_json::json!({"level": level}),
                )?
                .session_id,
        );
        levels.push(SessionLevel {
            level,
            raw: 0,
            stored: 0,
            last_raw: 0,
            last_stored: 0,
            save: Latency::new(),
            restore: Latency::new(),
            save_ns: 0.0,
            restore_ns: 0.0,
        });
    }
    // Save every version at every level, levels rotating.
    for (v, content) in contents.iter().enumerate() {
        for j in 0..4 {
            let l = (v + j) % 4;
            let c = content.clone();
            let t = Instant::now();
            mem.sessions().save(&ids[l], c, l as u8)?;
            let d = t.elapsed();
            levels[l].save.record(d);
            levels[l].save_ns += d.as_nanos() as f64;
        }
        tick();
    }
    // Restore every version at every level (checking it is exact, untimed).
    for (v, content) in contents.iter().enumerate() {
        for j in 0..4 {
            let l = (v + j) % 4;
            let t = Instant::now();
            let r = mem.sessions().restore(&ids[l], Some(v as u64 + 1))?;
            let d = t.elapsed();
            levels[l].restore.record(d);
            levels[l].restore_ns += d.as_nanos() as f64;
            if &r.content != content {
                return Err(format!("level {l} version {} did not restore exactly", v + 1).into());
            }
        }
        tick();
    }
    for (l, id) in ids.iter().enumerate() {
        let vs = mem.sessions().versions(id)?;
        levels[l].raw = vs.iter().map(|v| v.raw_bytes).sum();
        levels[l].stored = vs.iter().map(|v| v.stored_bytes).sum();
        if let Some(last) = vs.last() {
            levels[l].last_raw = last.raw_bytes;
            levels[l].last_stored = last.stored_bytes;
        }
    }
    Ok(SessionResult {
        levels,
        json_bytes_last,
    })
}
