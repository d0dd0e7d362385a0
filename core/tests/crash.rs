//! Crash tests: a child process writes with acknowledged writes printed to
//! stdout; the parent kills it with SIGKILL at a random moment, reopens the
//! store and checks that nothing acknowledged was lost and that every stored
//! episode is found by search.
//!
//! `make test` runs a few iterations; `MEMSTRATA_CRASH_ITERS=200 cargo test
//! --release -p memstrata --test crash -- --nocapture` is the long run.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

mod common;

use common::Rng;
use memstrata::{Durability, EncryptionKey, Memory, NewEpisode, SearchFilters, VectorQuery};
use serde_json::json;

/// Set (to anything) for a child writing an encrypted store (sealed records and index).
const KEYED_ENV: &str = "MEMSTRATA_CRASH_KEYED";

fn test_key() -> EncryptionKey {
    EncryptionKey::new([0x24; 32])
}

fn open_store(path: &std::path::Path, keyed: bool) -> Memory {
    let mut b = Memory::builder().path(path);
    if keyed {
        b = b.encryption_key(test_key());
    }
    b.open().unwrap()
}

fn now_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis()
}

#[derive(Debug, Default)]
struct Acked {
    short_term: Vec<(String, u64)>,
    semantic: Vec<(String, u64)>,
    episodes: Vec<(String, u64, u128)>,
    workspace: Vec<u64>,
}

/// Run one child until killed; returns what it acknowledged and the kill time (ms since epoch).
fn run_child(
    path: &std::path::Path,
    mode: &str,
    kill_after: Duration,
    start_at: u64,
    keyed: bool,
) -> (Acked, u128) {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    if keyed {
        cmd.env(KEYED_ENV, "1");
    }
    let mut child = cmd
        .args([
            "--exact",
            "crash_writer_child",
            "--nocapture",
            "--include-ignored",
            "--test-threads=1",
        ])
        .env("MEMSTRATA_CRASH_WRITER", path)
        .env("MEMSTRATA_CRASH_MODE", mode)
        .env("MEMSTRATA_CRASH_START", start_at.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut acked = Acked::default();
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let parts: Vec<&str> = line.split(' ').collect();
            match parts.as_slice() {
                ["ACK", "st", k, n] => acked.short_term.push((k.to_string(), n.parse().unwrap())),
                ["ACK", "sem", k, n] => acked.semantic.push((k.to_string(), n.parse().unwrap())),
                ["ACK", "ep", id, n, t] => {
                    acked
                        .episodes
                        .push((id.to_string(), n.parse().unwrap(), t.parse().unwrap()))
                }
                ["ACK", "ws", n] => acked.workspace.push(n.parse().unwrap()),
                _ => {}
            }
        }
        acked
    });
    // Wait until the child is writing, then let it run for `kill_after`.
    let started = Instant::now();
    while !path.join("db").exists() && started.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(kill_after);
    let killed_at = now_ms();
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    (reader.join().unwrap(), killed_at)
}

fn check(
    path: &std::path::Path,
    acked: &Acked,
    must_hold_before_ms: Option<u128>,
    keyed: bool,
) -> usize {
    let mem = open_store(path, keyed);
    let mut checked = 0;
    // Keys are rewritten: the last acknowledged value of each key must be there.
    let latest = |v: &[(String, u64)]| {
        v.iter()
            .cloned()
            .collect::<std::collections::BTreeMap<String, u64>>()
    };
    for (k, n) in &latest(&acked.short_term) {
        // A later write to the same key may have landed without its ack being read: values only grow.
        let got = mem
            .short_term()
            .retrieve(k)
            .unwrap()
            .and_then(|v| v.as_u64());
        assert!(
            got.is_some_and(|g| g >= *n),
            "acknowledged short-term write {k}={n} lost (found {got:?})"
        );
        checked += 1;
    }
    for (k, n) in &latest(&acked.semantic) {
        let got = mem
            .semantic()
            .retrieve(k)
            .unwrap()
            .and_then(|v| v["n"].as_u64());
        assert!(
            got.is_some_and(|g| g >= *n),
            "acknowledged semantic write {k}={n} lost (found {got:?})"
        );
        checked += 1;
    }
    let ws = mem.working().workspace().unwrap();
    for n in acked.workspace.iter().rev().take(8) {
        assert!(
            ws.contains(&json!(n)),
            "acknowledged workspace item {n} lost"
        );
    }
    for (id, n, t) in &acked.episodes {
        if must_hold_before_ms.is_some_and(|limit| *t > limit) {
            continue;
        }
        let ep = mem
            .episodic()
            .get(id)
            .unwrap()
            .unwrap_or_else(|| panic!("acknowledged episode {id} lost"));
        assert_eq!(ep.summary, format!("crash episode marker{n}"));
        let hits = mem
            .episodic()
            .search(&format!("marker{n}"), &SearchFilters::default(), 5)
            .unwrap();
        assert!(
            hits.iter().any(|h| &h.episode.id == id),
            "stored episode {id} not found by search"
        );
        checked += 1;
    }
    // Every episode in sled (acknowledged or not) is searchable: the index is consistent.
    let all = mem.episodic().recent(MAX_HITS).unwrap();
    let f = SearchFilters {
        tags: vec!["crash".into()],
        ..Default::default()
    };
    assert_eq!(
        mem.episodic().search("", &f, MAX_HITS).unwrap().len(),
        all.len(),
        "index and sled disagree"
    );
    // The vector index is rebuilt from sled: every stored episode has its vector,
    // and the acknowledged ones are found by vector search.
    let by_vector = mem
        .episodic()
        .search_hybrid(
            "",
            &f,
            MAX_HITS,
            &VectorQuery::embedding(vec![1.0, 0.5, 0.25]),
        )
        .unwrap();
    assert_eq!(by_vector.len(), all.len(), "vector index and sled disagree");
    let whole_store = all.len() < MAX_HITS;
    for (id, n, t) in &acked.episodes {
        if must_hold_before_ms.is_none_or(|limit| *t <= limit) {
            // One page holds every episode of a small store; a larger one (a fast
            // machine writes more before the kill) is searched with the episode's
            // own vector, which ranks it among the few that share that vector.
            let found = if whole_store {
                by_vector.iter().any(|h| &h.episode.id == id)
            } else {
                mem.episodic()
                    .search_hybrid("", &f, MAX_HITS, &VectorQuery::embedding(vector_of(*n)))
                    .unwrap()
                    .iter()
                    .any(|h| &h.episode.id == id)
            };
            assert!(
                found,
                "acknowledged episode {id} missing from vector search"
            );
        }
    }
    checked
}

/// Most hits one search returns (`Limits::max_results`).
const MAX_HITS: usize = 1000;

/// The embedding the crash writer gives episode `n`.
fn vector_of(n: u64) -> Vec<f32> {
    vec![1.0, (n % 7) as f32, (n % 5) as f32]
}

fn immediate_run(keyed: bool) {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(0x9e3779b97f4a7c15);
    let mut total = 0;
    let mut start = 0u64;
    for _ in 0..common::crash_iterations() {
        let kill_after = Duration::from_millis(50 + rng.next() % 400);
        let (acked, _) = run_child(dir.path(), "immediate", kill_after, start, keyed);
        start += 100_000;
        total += check(dir.path(), &acked, None, keyed);
    }
    eprintln!(
        "immediate (keyed: {keyed}): {} iterations, {total} acknowledged writes verified",
        common::crash_iterations()
    );
}

#[test]
fn immediate_durability_loses_nothing_acknowledged_under_sigkill() {
    immediate_run(false);
}

/// The same on an encrypted store: sealed records and a sealed index (soft
/// commits, merges and orphan removal over sealed files).
#[test]
fn immediate_durability_loses_nothing_acknowledged_under_sigkill_sealed() {
    immediate_run(true);
}

#[test]
fn periodic_durability_loses_at_most_the_window() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(0x2545f4914f6cdd1d);
    let mut start = 0u64;
    for _ in 0..common::crash_iterations() {
        let kill_after = Duration::from_millis(600 + rng.next() % 400);
        let (acked, killed_at) = run_child(dir.path(), "periodic", kill_after, start, false);
        start += 100_000;
        // Window 100 ms (flush_every_ms) plus generous scheduling slack on a loaded 2-core box.
        let limit = killed_at.saturating_sub(100 + 400);
        let acked_old = Acked {
            short_term: vec![],
            semantic: vec![],
            workspace: vec![],
            episodes: acked.episodes.clone(),
        };
        check(dir.path(), &acked_old, Some(limit), false);
    }
}

#[test]
#[ignore = "child process for the crash tests"]
fn crash_writer_child() {
    let Ok(path) = std::env::var("MEMSTRATA_CRASH_WRITER") else {
        return;
    };
    let durability = match std::env::var("MEMSTRATA_CRASH_MODE").as_deref() {
        Ok("periodic") => Durability::Periodic(100),
        _ => Durability::Immediate,
    };
    let start: u64 = std::env::var("MEMSTRATA_CRASH_START")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let mut builder = Memory::builder().path(path).durability(durability);
    if std::env::var_os(KEYED_ENV).is_some() {
        builder = builder.encryption_key(test_key());
    }
    let mem = builder.open().unwrap();
    let out = std::io::stdout();
    use std::io::Write;
    for n in start.. {
        let mut lock = out.lock();
        let k = format!("k{}", n % 50);
        mem.short_term().store(&k, json!(n), None).unwrap();
        if durability == Durability::Immediate {
            writeln!(lock, "ACK st {k} {n}").unwrap();
        }
        let sk = format!("s{}", n % 20);
        mem.semantic().store(&sk, json!({"n": n})).unwrap();
        if durability == Durability::Immediate {
            writeln!(lock, "ACK sem {sk} {n}").unwrap();
        }
        let id = mem
            .episodic()
            .record(
                NewEpisode::new(format!("crash episode marker{n}"))
                    .tags(["crash"])
                    .embedding(vector_of(n)),
            )
            .unwrap();
        writeln!(lock, "ACK ep {id} {n} {}", now_ms()).unwrap();
        mem.working().add_to_workspace(json!(n)).unwrap();
        if durability == Durability::Immediate {
            writeln!(lock, "ACK ws {n}").unwrap();
        }
        lock.flush().unwrap();
    }
}
