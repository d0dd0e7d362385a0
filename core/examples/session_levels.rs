//! Measure the four session compression levels on a deterministic, realistic
//! session history: 50 saves of a growing agent conversation plus its working
//! state (plan, files touched, scratchpad, tool calls and tool output).
//!
//! ```text
//! cargo run --release -p memstrata --example session_levels [-- --detail]
//! ```
//!
//! `--detail` also prints every version's raw and stored size (to stderr).
//!
//! Prints a Markdown table: total canonical (raw) bytes of all versions, total
//! stored bytes, ratio, and save / restore throughput in MB/s of raw content
//! (median of 5 runs; each run is a fresh store, `Durability::Manual`, so the
//! figures are the codec and sled, not fsync).

use std::time::{Duration, Instant};

use memstrata::{Durability, Memory};
use serde_json::{Value, json};

const SAVES: usize = 50;
const RUNS: usize = 5;

/// Small deterministic PRNG (64-bit LCG), so every run sees the same history.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.below(xs.len())]
    }
}

const WORDS: &[&str] = &[
    "the",
    "a",
    "we",
    "should",
    "check",
    "whether",
    "index",
    "commit",
    "segment",
    "writer",
    "reader",
    "query",
    "test",
    "fails",
    "because",
    "timeout",
    "after",
    "before",
    "function",
    "returns",
    "error",
    "value",
    "config",
    "option",
    "cache",
    "memory",
    "thread",
    "lock",
    "mutex",
    "async",
    "runtime",
    "request",
    "response",
    "handler",
    "parse",
    "serialize",
    "field",
    "struct",
    "module",
    "crate",
    "build",
    "release",
    "debug",
    "log",
    "trace",
    "user",
    "session",
    "token",
    "limit",
    "retry",
    "backoff",
    "queue",
    "batch",
    "flush",
    "sync",
    "disk",
    "file",
    "path",
    "directory",
    "update",
    "delete",
    "insert",
    "select",
    "table",
    "row",
    "column",
    "schema",
    "migration",
    "version",
    "upgrade",
    "deprecated",
    "warning",
    "refactor",
    "rename",
    "extract",
    "inline",
    "closure",
    "trait",
    "generic",
    "lifetime",
    "borrow",
    "clone",
    "reference",
    "pointer",
    "slice",
    "vector",
    "map",
    "set",
    "iterator",
    "and",
    "or",
    "not",
    "then",
    "so",
    "it",
    "is",
    "was",
    "will",
    "can",
    "to",
    "of",
    "in",
    "on",
    "with",
    "for",
];

const FILES: &[&str] = &[
    "src/lib.rs",
    "src/engine.rs",
    "src/index.rs",
    "src/codec.rs",
    "src/config.rs",
    "src/episodic.rs",
    "src/semantic.rs",
    "tests/storage.rs",
    "tests/layers.rs",
    "Cargo.toml",
    "docs/format.md",
    "README.md",
];

const TOOLS: &[&str] = &[
    "read_file",
    "edit_file",
    "run_tests",
    "grep",
    "list_dir",
    "git_diff",
];

fn sentence(r: &mut Rng, words: usize) -> String {
    let mut s = String::new();
    for i in 0..words {
        if i > 0 {
            s.push(' ');
        }
        s.push_str(r.pick(WORDS));
    }
    s.push('.');
    s
}

fn paragraph(r: &mut Rng) -> String {
    let n = 2 + r.below(5);
    (0..n)
        .map(|_| {
            let words = 6 + r.below(14);
            sentence(r, words)
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn code_snippet(r: &mut Rng) -> String {
    let n = 4 + r.below(12);
    let mut s = String::new();
    for i in 0..n {
        let w1 = r.pick(WORDS);
        let w2 = r.pick(WORDS);
        s.push_str(&format!(
            "{:4} |     let {w1}_{i} = self.{w2}(&{w1}, {})?;\n",
            100 + i,
            r.below(64)
        ));
    }
    s
}

fn message(r: &mut Rng, n: usize, ts: &mut i64) -> Value {
    *ts += 5 + r.below(90) as i64;
    let stamp = format!(
        "2026-01-01T{:02}:{:02}:{:02}Z",
        (*ts / 3600) % 24,
        (*ts / 60) % 60,
        *ts % 60
    );
    match n % 3 {
        0 => {
            json!({"role": "user", "content": paragraph(r), "timestamp": stamp, "tokens": 20 + r.below(200)})
        }
        1 => {
            let tool = r.pick(TOOLS);
            let path = r.pick(FILES);
            json!({
                "role": "assistant",
                "content": paragraph(r),
                "timestamp": stamp,
                "tokens": 50 + r.below(400),
                "tool_calls": [{"id": format!("call_{n:05}"), "name": tool, "arguments": {"path": path, "line": r.below(500)}}],
            })
        }
        _ => json!({
            "role": "tool",
            "tool_call_id": format!("call_{:05}", n - 1),
            "content": code_snippet(r),
            "timestamp": stamp,
            "tokens": 80 + r.below(600),
        }),
    }
}

/// The 50 versions of the session content.
fn history() -> Vec<Value> {
    let mut r = Rng(0x5EED);
    let mut ts = 12 * 3600;
    let mut messages: Vec<Value> = Vec::new();
    let mut plan: Vec<Value> = (0..12)
        .map(|i| json!({"step": i + 1, "description": sentence(&mut r, 8), "status": "pending"}))
        .collect();
    let mut touched: Vec<String> = Vec::new();
    let mut out = Vec::with_capacity(SAVES);
    for save in 0..SAVES {
        for _ in 0..(3 + r.below(4)) {
            let n = messages.len();
            messages.push(message(&mut r, n, &mut ts));
        }
        let done = (save * plan.len()) / SAVES;
        for (i, p) in plan.iter_mut().enumerate() {
            p["status"] = json!(if i < done {
                "done"
            } else if i == done {
                "in_progress"
            } else {
                "pending"
            });
        }
        let f = r.pick(FILES).to_owned();
        if !touched.contains(&f) {
            touched.push(f);
        }
        out.push(json!({
            "agent": {"name": "claude", "model": "claude-sonnet", "temperature": 0.2},
            "task": "Make index commits crash-safe and add tests",
            "messages": messages,
            "state": {
                "save": save + 1,
                "plan": plan,
                "files_touched": touched,
                "scratchpad": paragraph(&mut r),
                "open_questions": [sentence(&mut r, 10), sentence(&mut r, 9)],
                "token_usage": {"prompt": 1000 * (save + 1) + r.below(1000), "completion": 300 * (save + 1)},
            },
        }));
    }
    out
}

struct Measure {
    per_version: Vec<(u64, u64)>,
    raw: u64,
    stored: u64,
    save: Duration,
    restore: Duration,
    last_stored: u64,
    last_raw: u64,
}

fn run(level: u8, versions: &[Value]) -> Measure {
    let mem = Memory::builder()
        .temporary()
        .durability(Durability::Manual)
        .open()
        .expect("open a temporary store");
    let sid = mem
        .sessions()
        .create("bench", json!({"level": level}))
        .expect("create")
        .session_id;
    let t0 = Instant::now();
    for v in versions {
        mem.sessions().save(&sid, v.clone(), level).expect("save");
    }
    let save = t0.elapsed();
    let t1 = Instant::now();
    for (i, v) in versions.iter().enumerate() {
        let got = mem
            .sessions()
            .restore(&sid, Some(i as u64 + 1))
            .expect("restore");
        assert!(
            &got.content == v,
            "level {level} version {} restores exactly",
            i + 1
        );
    }
    let restore = t1.elapsed();
    let infos = mem.sessions().versions(&sid).expect("versions");
    let last = infos.last().expect("at least one version");
    Measure {
        per_version: infos
            .iter()
            .map(|i| (i.raw_bytes, i.stored_bytes))
            .collect(),
        raw: infos.iter().map(|i| i.raw_bytes).sum(),
        stored: infos.iter().map(|i| i.stored_bytes).sum(),
        save,
        restore,
        last_stored: last.stored_bytes,
        last_raw: last.raw_bytes,
    }
}

fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort();
    xs[xs.len() / 2]
}

fn main() {
    let detail = std::env::args().any(|a| a == "--detail");
    let versions = history();
    println!(
        "History: {SAVES} saves, final version {} messages.\n",
        versions
            .last()
            .and_then(|v| v["messages"].as_array())
            .map_or(0, Vec::len)
    );
    println!(
        "| level | raw bytes (all versions) | stored bytes | ratio | last version raw -> stored | save MB/s | restore MB/s |"
    );
    println!("|---|---|---|---|---|---|---|");
    for level in 0..=3u8 {
        let runs: Vec<Measure> = (0..RUNS).map(|_| run(level, &versions)).collect();
        let save = median(runs.iter().map(|m| m.save).collect());
        let restore = median(runs.iter().map(|m| m.restore).collect());
        let m = &runs[0];
        let mb = m.raw as f64 / 1e6;
        println!(
            "| {level} | {} | {} | {:.2}x | {} -> {} | {:.0} | {:.0} |",
            m.raw,
            m.stored,
            m.raw as f64 / m.stored as f64,
            m.last_raw,
            m.last_stored,
            mb / save.as_secs_f64(),
            mb / restore.as_secs_f64(),
        );
        if detail {
            let sizes: Vec<String> = m
                .per_version
                .iter()
                .map(|(r, s)| format!("{r}->{s}"))
                .collect();
            eprintln!(
                "level {level} per version (raw->stored): {}",
                sizes.join(" ")
            );
        }
    }
}
