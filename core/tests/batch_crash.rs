//! Batch writes under SIGKILL: a child process writes batches in a loop
//! (`record_many` of 10 episodes, then `store_many` of 5 entries, durability
//! `Immediate`) and prints each acknowledged batch; the parent kills it at a
//! random moment, reopens the store and checks that every batch is either
//! wholly present (records readable and every one of them searchable) or
//! wholly absent, and that every acknowledged batch is present.
//!
//! A conformance suite: on sled by default, on PostgreSQL with
//! `MEMSTRATA_TEST_BACKEND=postgres` (the child opens the same store URL).
//! `MEMSTRATA_CRASH_ITERS=50 cargo test -p memstrata --test batch_crash` runs longer.

mod common;

use common::Rng;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use memstrata::semantic::NewKnowledge;
use memstrata::{Durability, Memory, NewEpisode, SearchFilters};
use serde_json::json;

/// Episodes per `record_many` and entries per `store_many`.
const EPISODES: usize = 10;
const ENTRIES: usize = 5;
/// Batches per context (keeps a context's episodes under one page of 1000):
/// batch `n` goes to context `<ctx>_<n / PER_CONTEXT>`.
const PER_CONTEXT: u64 = 90;

#[derive(Debug, Default)]
struct Acked {
    /// Batch number -> the ids `record_many` returned.
    episodes: BTreeMap<u64, Vec<String>>,
    /// Batch numbers whose `store_many` returned.
    knowledge: BTreeSet<u64>,
}

/// Run one child writing into context `ctx` until killed `kill_after` after it opened the store.
fn run_child(path: &Path, ctx: &str, kill_after: Duration) -> Acked {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "batch_writer_child",
            "--nocapture",
            "--include-ignored",
            "--test-threads=1",
        ])
        .env("MEMSTRATA_BATCH_WRITER", path)
        .env("MEMSTRATA_BATCH_CTX", ctx)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (ready_tx, ready_rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut acked = Acked::default();
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let parts: Vec<&str> = line.split(' ').collect();
            match parts.as_slice() {
                // (libtest may print `test batch_writer_child ... ` before it)
                [.., "READY"] => {
                    let _ = ready_tx.send(());
                }
                ["ACK", "ep", n, ids] => {
                    acked.episodes.insert(
                        n.parse().unwrap(),
                        ids.split(',').map(str::to_owned).collect(),
                    );
                }
                ["ACK", "kn", n] => {
                    acked.knowledge.insert(n.parse().unwrap());
                }
                _ => {}
            }
        }
        acked
    });
    // The child signals once its store is open (or its output ends: it failed).
    let _ = ready_rx.recv_timeout(Duration::from_secs(120));
    std::thread::sleep(kill_after);
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    reader.join().unwrap()
}

/// The batch number in `crash batch b<n> item<j>` / `b<n>k<j>`.
fn batch_of(s: &str) -> u64 {
    s.split_whitespace()
        .find_map(|t| {
            let digits: String = t
                .strip_prefix('b')?
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            digits.parse().ok()
        })
        .unwrap_or_else(|| panic!("no batch number in {s:?}"))
}

fn check(path: &Path, ctx: &str, acked: &Acked) -> usize {
    let root = Memory::open(path).unwrap();
    let subs: Vec<String> = root
        .contexts()
        .list()
        .unwrap()
        .into_iter()
        .filter(|c| c.starts_with(&format!("{ctx}_")))
        .collect();
    let mut checked = 0;
    for sub in subs {
        let mem = root.namespace(&sub).unwrap();
        let part = Acked {
            episodes: acked
                .episodes
                .iter()
                .filter(|(n, _)| sub == format!("{ctx}_{}", *n / PER_CONTEXT))
                .map(|(n, ids)| (*n, ids.clone()))
                .collect(),
            knowledge: acked
                .knowledge
                .iter()
                .filter(|n| sub == format!("{ctx}_{}", *n / PER_CONTEXT))
                .copied()
                .collect(),
        };
        checked += check_context(&mem, &part);
    }
    // Every acknowledged batch was in one of those contexts.
    assert_eq!(checked, acked.episodes.len() + acked.knowledge.len());
    checked
}

fn check_context(mem: &Memory, acked: &Acked) -> usize {
    // Episodes in the store, by batch.
    let stored = mem.episodic().recent(1000).unwrap();
    let mut by_batch: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    for ep in &stored {
        by_batch
            .entry(batch_of(&ep.summary))
            .or_default()
            .push(ep.id.clone());
    }
    for (n, ids) in &by_batch {
        assert_eq!(
            ids.len(),
            EPISODES,
            "batch {n} is partly stored: {} of {EPISODES} episodes",
            ids.len()
        );
        // Every stored episode of the batch is searchable, by tag and by word.
        let f = SearchFilters {
            tags: vec![format!("b{n}")],
            ..Default::default()
        };
        assert_eq!(
            mem.episodic().search("", &f, 100).unwrap().len(),
            EPISODES,
            "batch {n}: index and store disagree"
        );
        let hits = mem
            .episodic()
            .search(&format!("word{n}"), &SearchFilters::default(), 100)
            .unwrap();
        assert_eq!(hits.len(), EPISODES, "batch {n}: text search");
    }
    let mut checked = 0;
    for (n, ids) in &acked.episodes {
        for id in ids {
            assert!(
                mem.episodic().get(id).unwrap().is_some(),
                "acknowledged batch {n}: episode {id} lost"
            );
        }
        assert!(by_batch.contains_key(n), "acknowledged batch {n} lost");
        checked += 1;
    }
    // Knowledge entries, by batch.
    let mut kb: BTreeMap<u64, usize> = BTreeMap::new();
    for k in mem.semantic().keys("").unwrap() {
        *kb.entry(batch_of(&k)).or_default() += 1;
    }
    for (n, count) in &kb {
        assert_eq!(*count, ENTRIES, "knowledge batch {n} is partly stored");
        let hits = mem.semantic().query(&format!("fact{n}"), 100).unwrap();
        assert_eq!(hits.len(), ENTRIES, "knowledge batch {n}: query");
    }
    for n in &acked.knowledge {
        assert!(kb.contains_key(n), "acknowledged knowledge batch {n} lost");
        checked += 1;
    }
    checked
}

#[test]
fn every_batch_is_whole_or_absent_after_sigkill() {
    let dir = common::tempdir();
    let path = dir.join("store");
    let mut rng = Rng(0x5851_f42d_4c95_7f2d);
    let mut total = 0;
    let mut with_data = 0;
    for it in 0..common::crash_iterations() {
        let ctx = format!("it{it}");
        let kill_after = Duration::from_millis(30 + rng.next() % 400);
        let acked = run_child(&path, &ctx, kill_after);
        let n = check(&path, &ctx, &acked);
        total += n;
        with_data += usize::from(n > 0);
    }
    eprintln!(
        "batch crash: {} iterations ({with_data} with acknowledged batches), {total} acknowledged batches verified",
        common::crash_iterations()
    );
}

#[test]
#[ignore = "child process for the batch crash test"]
fn batch_writer_child() {
    let Ok(path) = std::env::var("MEMSTRATA_BATCH_WRITER") else {
        return;
    };
    let ctx = std::env::var("MEMSTRATA_BATCH_CTX").unwrap();
    let root = Memory::builder()
        .path(path)
        .durability(Durability::Immediate)
        .open()
        .unwrap();
    let mut out = std::io::stdout();
    writeln!(out, "\nREADY").unwrap();
    out.flush().unwrap();
    let mut mem = root.namespace(&format!("{ctx}_0")).unwrap();
    for n in 0.. {
        if n % PER_CONTEXT == 0 {
            mem = root
                .namespace(&format!("{ctx}_{}", n / PER_CONTEXT))
                .unwrap();
        }
        let eps: Vec<NewEpisode> = (0..EPISODES)
            .map(|j| {
                NewEpisode::new(format!("crash batch b{n} item{j} word{n}"))
                    .content(json!({"n": n, "j": j}))
                    .tags(["crash".to_owned(), format!("b{n}")])
            })
            .collect();
        let ids = mem.episodic().record_many(eps).unwrap();
        writeln!(out, "ACK ep {n} {}", ids.join(",")).unwrap();
        out.flush().unwrap();
        let items: Vec<NewKnowledge> = (0..ENTRIES)
            .map(|j| NewKnowledge::new(format!("b{n}k{j}"), json!({"text": format!("fact{n}")})))
            .collect();
        mem.semantic().store_many(items).unwrap();
        writeln!(out, "ACK kn {n}").unwrap();
        out.flush().unwrap();
    }
}
