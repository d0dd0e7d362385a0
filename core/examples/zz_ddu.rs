//! Duplicate detection on write: quality and cost (docs/memory-hygiene.md).
//!
//! `cargo run --release -p memstrata --example dedup_bench -- quality [DATA_DIR]`
//! records real dialogue turns (FriendsQA and Molweni subsets shipped in
//! benches/retrieval/data) plus a generated set, with copies edited by known
//! operations inserted at random later positions, and reports the detector's
//! precision and recall (`duplicate_of` of `record_detailed` with the `link`
//! policy, which stores every item and names its duplicate, against the truth).
//!
//! `... -- cost N [unique|real] [ROUNDS] [dup]` records N distinct generated
//! episodes (`unique`: sentences of random words; `real`: the first N real
//! dialogue turns of the `quality` data, N at most their number less 100,
//! which warm up) into a fresh store per policy (`keep`: no detection, the context
//! never asked for it; `skip`, `merge`, `link`: detection on every write),
//! the policies alternated over ROUNDS rounds (default 3, each round starting
//! one policy later), and prints the mean time per `record` of each run and
//! each policy's median over `keep`'s, elapsed and (on Unix) in CPU time of
//! the writing thread. With `dup`, the N texts are recorded
//! first (untimed) and the timed writes are N copies of them (case and
//! punctuation changed): every write finds a duplicate, and `merge` rewrites it.

#![allow(unsafe_code)] // `thread_cpu_us`: one libc call

use std::time::Instant;

use memstrata::episodic::OnDuplicate;
use memstrata::{Memory, NewEpisode};

/// A small deterministic generator (splitmix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

const WORDS: &[&str] = &[
    "deploy",
    "billing",
    "service",
    "staging",
    "invoice",
    "customer",
    "meeting",
    "design",
    "review",
    "budget",
    "travel",
    "Lisbon",
    "flight",
    "report",
    "quarterly",
    "migration",
    "database",
    "backup",
    "release",
    "feature",
    "request",
    "support",
    "ticket",
    "priority",
    "schedule",
    "Tuesday",
    "morning",
    "dinner",
    "Ana",
    "Ben",
    "Chloe",
    "prefers",
    "dark",
    "mode",
    "editor",
    "email",
    "weekly",
    "summary",
    "contract",
    "renewal",
    "server",
    "latency",
    "alert",
    "incident",
    "postmortem",
    "roadmap",
    "hiring",
    "interview",
];

fn generated(rng: &mut Rng, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| {
            let len = 6 + rng.below(12);
            let mut w: Vec<&str> = (0..len).map(|_| WORDS[rng.below(WORDS.len())]).collect();
            w.push(if i % 2 == 0 { "today" } else { "tomorrow" });
            let mut s = w.join(" ");
            s.push_str(&format!(" #{i}"));
            s
        })
        .collect()
}

fn real_turns(dir: &str) -> Vec<String> {
    let mut out = Vec::new();
    let read = |f: &str| -> serde_json::Value {
        let text = std::fs::read_to_string(format!("{dir}/{f}")).expect("data file");
        serde_json::from_str(&text).expect("json")
    };
    let friends = read("friendsqa_mini.json");
    for scene in friends["data"].as_array().expect("data") {
        for p in scene["paragraphs"].as_array().expect("paragraphs") {
            for u in p["utterances:"].as_array().expect("utterances") {
                if let Some(t) = u["utterance"].as_str() {
                    out.push(t.to_owned());
                }
            }
        }
    }
    let molweni = read("molweni_mini.json");
    for d in molweni["data"].as_array().expect("data") {
        for e in d["edus"].as_array().expect("edus") {
            if let Some(t) = e["text"].as_str() {
                out.push(t.to_owned());
            }
        }
    }
    out
}

/// An edit that makes a duplicate, and its name.
fn edit(rng: &mut Rng, text: &str, op: usize) -> (String, &'static str) {
    let words: Vec<&str> = text.split_whitespace().collect();
    let mut w: Vec<String> = words.iter().map(|s| (*s).to_owned()).collect();
    match op {
        0 => (text.to_owned(), "exact copy"),
        1 => {
            let mut s = text.to_uppercase();
            s.push_str(" !");
            (s, "case and punctuation")
        }
        2 if w.len() >= 8 => {
            let i = rng.below(w.len());
            w.insert(i, WORDS[rng.below(WORDS.len())].to_owned());
            (w.join(" "), "one word inserted")
        }
        3 if w.len() >= 8 => {
            let i = rng.below(w.len());
            w.remove(i);
            (w.join(" "), "one word deleted")
        }
        4 if w.len() >= 8 => {
            let i = rng.below(w.len());
            w[i] = WORDS[rng.below(WORDS.len())].to_owned();
            (w.join(" "), "one word replaced")
        }
        5 if w.len() >= 12 => {
            let i = rng.below(w.len() - 1);
            w.swap(i, i + 1);
            let j = rng.below(w.len());
            w[j] = WORDS[rng.below(WORDS.len())].to_owned();
            (w.join(" "), "two words swapped, one replaced")
        }
        _ => (text.to_owned(), "exact copy"),
    }
}

fn normal(s: &str) -> String {
    let mut out = String::new();
    for part in s
        .split(|c: char| !c.is_alphanumeric())
        .filter(|p| !p.is_empty())
    {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(&part.to_lowercase());
    }
    out
}

fn quality(name: &str, base: Vec<String>, seed: u64) {
    let mut rng = Rng(seed);
    // (text, original index, edit name): originals have no edit.
    let mut items: Vec<(String, usize, Option<&'static str>)> = base
        .iter()
        .enumerate()
        .map(|(i, t)| (t.clone(), i, None))
        .collect();
    let copies = base.len() * 2 / 5;
    for _ in 0..copies {
        let src = rng.below(base.len());
        let which = rng.below(6);
        let (t, op) = edit(&mut rng, &base[src], which);
        // Inserted after its original.
        let pos = items
            .iter()
            .position(|x| x.1 == src && x.2.is_none())
            .expect("orig");
        let at = pos + 1 + rng.below(items.len() - pos);
        items.insert(at, (t, src, Some(op)));
    }
    let dir = tempfile::tempdir().expect("tmp");
    let mem = Memory::open(dir.path()).expect("open");
    let mut seen_norm: std::collections::HashMap<String, usize> = Default::default();
    let mut id_of_orig: std::collections::HashMap<usize, String> = Default::default();
    let mut orig_of_id: std::collections::HashMap<String, usize> = Default::default();
    let (mut tp, mut fp, mut fneg, mut tn) = (0usize, 0usize, 0usize, 0usize);
    let mut per_op: std::collections::BTreeMap<&str, (usize, usize)> = Default::default();
    // Found duplicates that are true ones, by similarity (for a higher threshold).
    let mut sims: Vec<(f32, bool)> = Vec::new();
    for (text, src, op) in &items {
        let r = mem
            .episodic()
            .record_detailed(NewEpisode::new(text.clone()).on_duplicate(OnDuplicate::Link))
            .expect("record");
        let norm = normal(text);
        // Truth: an edited copy of an earlier original, or a text whose
        // normalised form was seen before (real dialogue repeats itself).
        let truth = op.is_some() || seen_norm.contains_key(&norm);
        let found = r.duplicate_of.is_some();
        if let Some(op) = op {
            let e = per_op.entry(op).or_default();
            e.1 += 1;
            if found {
                e.0 += 1;
            }
        }
        match (truth, found) {
            (true, true) => tp += 1,
            (true, false) => fneg += 1,
            (false, true) => {
                fp += 1;
                if fp <= 5 {
                    let other = r.duplicate_of.as_deref().and_then(|d| orig_of_id.get(d));
                    println!(
                        "  false positive: {:?} ~ {:?} ({:.2})",
                        text,
                        other.map(|o| base[*o].as_str()),
                        r.similarity.unwrap_or(0.0)
                    );
                }
            }
            (false, false) => tn += 1,
        }
        if found {
            sims.push((r.similarity.unwrap_or(0.0), truth));
        }
        seen_norm.entry(norm).or_insert(*src);
        if op.is_none() {
            id_of_orig.insert(*src, r.id.clone());
            orig_of_id.insert(r.id.clone(), *src);
        }
    }
    let precision = tp as f64 / (tp + fp).max(1) as f64;
    let recall = tp as f64 / (tp + fneg).max(1) as f64;
    println!(
        "{name}: {} records ({} originals, {copies} edited copies); duplicates {} (tp {tp}, fn {fneg}), non-duplicates {} (fp {fp}, tn {tn}); precision {:.3}, recall {:.3}",
        items.len(),
        base.len(),
        tp + fneg,
        fp + tn,
        precision,
        recall
    );
    // At a higher threshold, a duplicate found below it is not found (the best
    // candidate is the most similar one, so nothing else would be).
    for t in [0.8f32, 0.9] {
        let tp_t = sims.iter().filter(|(s, tr)| *s >= t && *tr).count();
        let fp_t = sims.iter().filter(|(s, tr)| *s >= t && !*tr).count();
        println!(
            "  at threshold {t}: precision {:.3}, recall {:.3}",
            tp_t as f64 / (tp_t + fp_t).max(1) as f64,
            tp_t as f64 / (tp + fneg).max(1) as f64
        );
    }
    for (op, (hit, n)) in per_op {
        println!(
            "  {op}: {hit}/{n} found ({:.1}%)",
            100.0 * hit as f64 / n as f64
        );
    }
}

/// Sentences of random 4..9-letter words: texts that share few shingles.
fn unique_words(rng: &mut Rng, n: usize) -> Vec<String> {
    (0..n)
        .map(|_| {
            let len = 6 + rng.below(12);
            (0..len)
                .map(|_| {
                    let w = 4 + rng.below(6);
                    (0..w)
                        .map(|_| (b'a' + rng.below(26) as u8) as char)
                        .collect::<String>()
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

/// CPU time of the calling thread, in µs (`None` where not measured). A
/// write's own work (detection included) runs on the calling thread; the
/// search index and sled's I/O run on their own, so this is the part of a
/// write that duplicate detection adds to, and other processes' load
/// changes it far less than elapsed time.
#[cfg(unix)]
fn thread_cpu_us() -> Option<f64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the call's duration.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    (rc == 0).then(|| ts.tv_sec as f64 * 1e6 + ts.tv_nsec as f64 / 1e3)
}

fn thread_user_us() -> f64 {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    ru.ru_utime.tv_sec as f64 * 1e6 + ru.ru_utime.tv_usec as f64
}

/// One measured run: mean µs per `record` (elapsed, and CPU of the writing
/// thread) and how many of the timed writes found a duplicate.
struct Run {
    us: f64,
    cpu_us: Option<f64>,
    found: usize,
}

/// Records `texts` into a fresh store under `policy` (after `warm` and
/// `prefill`, untimed).
fn cost_run(warm: &[String], prefill: &[String], texts: &[String], policy: OnDuplicate) -> Run {
    let dir = tempfile::tempdir().expect("tmp");
    let mem = Memory::open(dir.path()).expect("open");
    let ep = |t: String| match policy {
        OnDuplicate::Keep => NewEpisode::new(t),
        p => NewEpisode::new(t).on_duplicate(p),
    };
    // Warm-up: the first writes open the index writer (and, for a policy
    // other than keep, build the context's empty dedup index). Texts of
    // their own, so no timed write is a duplicate of one.
    for t in warm.iter().chain(prefill) {
        mem.episodic().record(ep(t.clone())).expect("record");
    }
    let mut found = 0;
    let u0 = thread_user_us();
    let cpu0 = thread_cpu_us();
    let started = Instant::now();
    for t in texts {
        let r = mem
            .episodic()
            .record_detailed(ep(t.clone()))
            .expect("record");
        found += usize::from(r.duplicate_of.is_some());
    }
    let n = texts.len() as f64;
    Run {
        us: started.elapsed().as_secs_f64() * 1e6 / n,
        cpu_us: Some((thread_user_us() - u0) / n),
        found,
    }
}

fn cost(n: usize, set: &str, rounds: usize, dup: bool) {
    let mut rng = Rng(7);
    let unique = set == "unique";
    let (texts, warm) = if unique {
        (unique_words(&mut rng, n), unique_words(&mut rng, 100))
    } else if set == "real" {
        let mut all = real_turns("benches/retrieval/data");
        let warm = all.split_off(all.len().saturating_sub(100));
        all.truncate(n);
        (all, warm)
    } else {
        let mut all = generated(&mut rng, n + 100);
        let warm = all.split_off(n);
        (all, warm)
    };
    // With `dup`: the texts are recorded first (untimed), and the timed
    // writes are their copies in upper case with a "!" (the same normalised
    // text, not the same exact text): every timed write finds a duplicate.
    let (prefill, texts) = if dup {
        let copies = texts.iter().map(|t| edit(&mut rng, t, 1).0).collect();
        (texts, copies)
    } else {
        (Vec::new(), texts)
    };
    let policies = [
        OnDuplicate::Keep,
        OnDuplicate::Skip,
        OnDuplicate::Merge,
        OnDuplicate::Link,
    ];
    let mut runs: Vec<Vec<f64>> = vec![Vec::new(); policies.len()];
    let mut cpus: Vec<Vec<f64>> = vec![Vec::new(); policies.len()];
    for round in 0..rounds {
        // Each round starts one policy later: no policy always runs first
        // (or right after another one's store was dropped).
        for j in 0..policies.len() {
            let i = (j + round) % policies.len();
            let p = &policies[i];
            let r = cost_run(&warm, &prefill, &texts, *p);
            let cpu = r
                .cpu_us
                .map_or(String::new(), |c| format!(", {c:.1} µs CPU"));
            println!(
                "round {round}: {p}: {:.1} µs per record{cpu} ({} found a duplicate)",
                r.us, r.found
            );
            runs[i].push(r.us);
            cpus[i].extend(r.cpu_us);
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let meds: Vec<f64> = runs.iter_mut().map(median).collect();
    let cpu_meds: Option<Vec<f64>> = cpus
        .iter_mut()
        .map(|v| (!v.is_empty()).then(|| median(v)))
        .collect();
    println!(
        "cost ({}, {} {}, median of {rounds}):",
        match set {
            "unique" => "random words",
            "real" => "real dialogue turns",
            _ => "48-word vocabulary",
        },
        texts.len(),
        if dup {
            "duplicates of as many records"
        } else if set == "real" {
            "turns in their order, repeats included"
        } else {
            "distinct records"
        }
    );
    for (i, (p, m)) in policies.iter().zip(&meds).enumerate() {
        let cpu = cpu_meds.as_ref().map_or(String::new(), |c| {
            format!(
                "; CPU of the writing thread {:.1} µs ({:.2}x keep)",
                c[i],
                c[i] / c[0]
            )
        });
        println!(
            "  {p}: {m:.1} µs per record ({:.2}x keep){cpu}",
            m / meds[0]
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("quality") => {
            let dir = args
                .get(2)
                .cloned()
                .unwrap_or_else(|| "benches/retrieval/data".to_owned());
            quality(
                "real dialogue turns (FriendsQA + Molweni subsets)",
                real_turns(&dir),
                1,
            );
            let mut rng = Rng(3);
            quality("generated set", generated(&mut rng, 1000), 2);
        }
        Some("cost") => {
            let n = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(5000);
            let set = ["unique", "real"]
                .into_iter()
                .find(|s| args.get(3).is_some_and(|a| a == s))
                .unwrap_or("vocabulary");
            let rounds = args
                .iter()
                .skip(3)
                .find_map(|s| s.parse().ok())
                .unwrap_or(3);
            let dup = args.iter().skip(3).any(|s| s == "dup");
            cost(n, set, rounds, dup);
        }
        _ => eprintln!(
            "usage: dedup_bench quality [DATA_DIR] | cost [N] [unique|real] [ROUNDS] [dup]"
        ),
    }
}
