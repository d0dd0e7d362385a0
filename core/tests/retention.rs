//! Forgetting by utility: per-context retention policies (`max_episodes`,
//! `max_bytes`, `max_age`) evicting the lowest-utility episodes, access
//! counts from searches, the eviction audit and its reports (`status`,
//! `optimize`), and the `rank_by_utility` search option. A backend
//! conformance suite (sled, and PostgreSQL with MEMSTRATA_TEST_BACKEND=postgres).

mod common;

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use memstrata::retention::{EvictionReason, Retention, utility};
use memstrata::{Error, ManualClock, Memory, NewEpisode, SearchFilters, admin::OptimizeLevel};

fn open(path: &std::path::Path, clock: &Arc<ManualClock>) -> Memory {
    Memory::builder()
        .path(path)
        .clock(clock.clone())
        .open()
        .unwrap()
}

fn ids(mem: &Memory) -> Vec<String> {
    let mut v: Vec<String> = mem
        .episodic()
        .recent(10_000)
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect();
    v.sort();
    v
}

fn record(mem: &Memory, summary: &str, importance: u8, at: DateTime<Utc>) -> String {
    mem.episodic()
        .record(
            NewEpisode::new(summary)
                .importance(importance)
                .timestamp(at),
        )
        .unwrap()
}

#[test]
fn policy_is_stored_validated_and_cleared() {
    let dir = common::tempdir();
    let clock = Arc::new(ManualClock::starting_now());
    {
        let mem = open(&dir.path(), &clock);
        assert!(mem.contexts().retention(None).unwrap().is_unlimited());
        let p = Retention::new()
            .max_episodes(100)
            .max_bytes(1 << 20)
            .max_age(Duration::from_secs(3600));
        mem.contexts().set_retention(p, Some("proj")).unwrap();
        assert_eq!(mem.contexts().retention(Some("proj")).unwrap(), p);
        // Another context is untouched.
        assert!(mem.contexts().retention(None).unwrap().is_unlimited());
        for (bad, field) in [
            (Retention::new().max_episodes(0), "max_episodes"),
            (Retention::new().max_bytes(0), "max_bytes"),
            (Retention::new().max_age(Duration::ZERO), "max_age"),
        ] {
            match mem.contexts().set_retention(bad, None) {
                Err(Error::InvalidInput { field: f, .. }) => assert_eq!(f, field),
                other => panic!("{field}: {other:?}"),
            }
        }
        let status = mem.admin().status(false, false).unwrap();
        assert_eq!(status.retention.len(), 1);
        assert_eq!(status.retention[0].context, "proj");
        assert_eq!(status.retention[0].policy, p);
    }
    // Stored in the store: it survives a restart.
    let mem = open(&dir.path(), &clock);
    let p = mem.contexts().retention(Some("proj")).unwrap();
    assert_eq!(p.max_episodes, Some(100));
    assert_eq!(p.max_age, Some(Duration::from_secs(3600)));
    mem.contexts()
        .set_retention(Retention::new(), Some("proj"))
        .unwrap();
    assert!(
        mem.contexts()
            .retention(Some("proj"))
            .unwrap()
            .is_unlimited()
    );
    assert!(
        mem.admin()
            .status(false, false)
            .unwrap()
            .retention
            .is_empty()
    );
}

#[test]
fn max_episodes_evicts_the_lowest_utility_and_audits_each() {
    let dir = common::tempdir();
    let clock = Arc::new(ManualClock::starting_now());
    let mem = open(&dir.path(), &clock);
    let now = memstrata::Clock::now(&*clock);
    // Same time, importance 1..=10: utility follows importance.
    let mut by_importance = Vec::new();
    for i in 1..=10u8 {
        by_importance.push(record(&mem, &format!("episode number {i}"), i, now));
    }
    mem.contexts()
        .set_retention(Retention::new().max_episodes(5), None)
        .unwrap();
    let mut expect: Vec<String> = by_importance[5..].to_vec();
    expect.sort();
    assert_eq!(ids(&mem), expect, "the five most important are kept");

    let audit = mem.contexts().evictions(None, 100).unwrap();
    assert_eq!(audit.len(), 5);
    for a in &audit {
        assert_eq!(a.reason, EvictionReason::MaxEpisodes);
        assert_eq!(a.context, "default");
        assert!(by_importance[..5].contains(&a.id));
        assert!(mem.episodic().get(&a.id).unwrap().is_none());
    }
    let status = mem.admin().status(false, false).unwrap();
    assert_eq!(status.retention[0].evicted, 5);

    // Writes past the limit evict down to the low-water mark (90 %, here 5 - 0).
    for i in 0..7 {
        record(&mem, &format!("later episode {i}"), 5, now);
        assert!(ids(&mem).len() <= 5, "never above the limit after a write");
    }
    assert_eq!(
        mem.admin().status(false, false).unwrap().retention[0].evicted,
        12
    );
    // Another context is not limited.
    let other = mem.namespace("other").unwrap();
    for i in 0..8 {
        record(&other, &format!("other {i}"), 1, now);
    }
    assert_eq!(ids(&other).len(), 8);
}

#[test]
fn writes_amortise_to_the_low_water_mark() {
    let mem = common::temporary().unwrap();
    mem.contexts()
        .set_retention(Retention::new().max_episodes(20), None)
        .unwrap();
    let items: Vec<NewEpisode> = (0..20)
        .map(|i| NewEpisode::new(format!("batch item {i}")))
        .collect();
    mem.episodic().record_many(items).unwrap();
    assert_eq!(ids(&mem).len(), 20, "at the limit: nothing evicted");
    mem.episodic().record(NewEpisode::new("one more")).unwrap();
    // Over 20: down to 18 (20 - 20/10), so the next write does not evict.
    assert_eq!(ids(&mem).len(), 18);
    mem.episodic()
        .record(NewEpisode::new("and one more"))
        .unwrap();
    assert_eq!(ids(&mem).len(), 19);
    let s = mem.admin().status(false, false).unwrap();
    assert_eq!(s.retention[0].evicted, 3);
}

#[test]
fn max_bytes_bounds_the_stored_size() {
    let mem = common::temporary().unwrap();
    // Text that does not compress: stored sizes stay near 900 bytes.
    let mut x = 0x2545_f491_4f6c_dd1du64;
    for i in 0..10 {
        let big: String = (0..900)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                char::from(b'a' + (x % 26) as u8)
            })
            .collect();
        mem.episodic()
            .record(NewEpisode::new(format!("{big} {i}")).importance(5))
            .unwrap();
    }
    mem.contexts()
        .set_retention(Retention::new().max_bytes(4_000), None)
        .unwrap();
    let left = ids(&mem).len();
    assert!(
        (1..=4).contains(&left),
        "{left} episodes of ~900 bytes under 4,000"
    );
    let audit = mem.contexts().evictions(None, 100).unwrap();
    assert_eq!(audit.len(), 10 - left);
    assert!(audit.iter().all(|a| a.reason == EvictionReason::MaxBytes));
}

#[test]
fn max_age_evicts_by_optimize_and_reports_it() {
    let dir = common::tempdir();
    let clock = Arc::new(ManualClock::starting_now());
    let mem = open(&dir.path(), &clock);
    let now = memstrata::Clock::now(&*clock);
    let old = record(
        &mem,
        "an old observation",
        10,
        now - chrono::Duration::days(3),
    );
    let fresh = record(&mem, "a fresh observation", 1, now);
    mem.contexts()
        .set_retention(
            Retention::new().max_age(Duration::from_secs(2 * 86_400)),
            None,
        )
        .unwrap();
    // Enforced when set: the old one (however important) is past max_age.
    assert_eq!(ids(&mem), vec![fresh.clone()]);
    assert_eq!(
        mem.contexts().evictions(None, 10).unwrap()[0].reason,
        EvictionReason::MaxAge
    );
    assert!(mem.episodic().get(&old).unwrap().is_none());
    // Time passes with no write: optimize evicts and reports it.
    clock.advance(Duration::from_secs(3 * 86_400));
    let report = mem.admin().optimize(OptimizeLevel::Light, None).unwrap();
    let r = &report.optimization_details["retention"];
    assert_eq!(r["episodes_evicted"], 1, "{r}");
    assert_eq!(r["contexts"]["default"]["evicted"], 1, "{r}");
    assert_eq!(r["contexts"]["default"]["evicted_total"], 2, "{r}");
    assert_eq!(
        r["contexts"]["default"]["policy"]["max_age"],
        2.0 * 86_400.0
    );
    assert!(ids(&mem).is_empty());
}

#[test]
fn searched_episodes_outlive_unsearched_ones_across_restart() {
    let dir = common::tempdir();
    let clock = Arc::new(ManualClock::starting_now());
    let now = memstrata::Clock::now(&*clock);
    let mut useful = Vec::new();
    {
        let mem = open(&dir.path(), &clock);
        // A policy that does not bind yet turns access counting on.
        mem.contexts()
            .set_retention(Retention::new().max_episodes(100), None)
            .unwrap();
        for i in 0..6 {
            let topic = if i % 2 == 0 { "kiwi" } else { "plain" };
            let id = record(&mem, &format!("{topic} note {i}"), 5, now);
            if i % 2 == 0 {
                useful.push(id);
            }
        }
        for _ in 0..5 {
            let hits = mem
                .episodic()
                .search("kiwi", &SearchFilters::default(), 10)
                .unwrap();
            assert_eq!(hits.len(), 3);
        }
        // Counts are in memory until a flush (here: close).
    }
    let mem = open(&dir.path(), &clock);
    mem.contexts()
        .set_retention(Retention::new().max_episodes(3), None)
        .unwrap();
    useful.sort();
    assert_eq!(ids(&mem), useful);
    let a = mem.contexts().evictions(None, 10).unwrap();
    assert_eq!(a.len(), 3);
    // Equal importance and age: the evicted had no access, the kept five.
    let age = Duration::ZERO;
    assert!(
        (a[0].utility - utility(5, age, 0)).abs() < 1e-9,
        "{}",
        a[0].utility
    );
    assert!(utility(5, age, 5) > utility(5, age, 0));
}

#[test]
fn rank_by_utility_adds_importance_and_recency() {
    let dir = common::tempdir();
    let clock = Arc::new(ManualClock::starting_now());
    let mem = open(&dir.path(), &clock);
    let now = memstrata::Clock::now(&*clock);
    let old = record(
        &mem,
        "quarterly report draft",
        1,
        now - chrono::Duration::days(365),
    );
    let new = record(&mem, "quarterly report draft", 9, now);
    let plain = mem
        .episodic()
        .search("quarterly report", &SearchFilters::default(), 10)
        .unwrap();
    assert_eq!(plain.len(), 2);
    // Same text, same BM25 score.
    assert_eq!(plain[0].score, plain[1].score);
    let ranked = mem
        .episodic()
        .search(
            "quarterly report",
            &SearchFilters {
                rank_by_utility: true,
                ..Default::default()
            },
            1,
        )
        .unwrap();
    assert_eq!(ranked.len(), 1);
    assert_eq!(ranked[0].episode.id, new);
    // base · (1 + 0.5 · 8/9 + 0.5 · 1) for the new one.
    let expect = plain[0].score * (1.0 + 0.5 * 8.0 / 9.0 + 0.5);
    assert!(
        (ranked[0].score - expect).abs() < 1e-3,
        "{} vs {expect}",
        ranked[0].score
    );
    // Empty query: newest first anyway, but scored by importance and recency.
    let all = mem
        .episodic()
        .search(
            "",
            &SearchFilters {
                rank_by_utility: true,
                ..Default::default()
            },
            10,
        )
        .unwrap();
    assert_eq!(all[0].episode.id, new);
    assert_eq!(all[1].episode.id, old);
    assert!(all[0].score > all[1].score && all[1].score >= 1.0);
}

#[test]
fn utility_formula_is_documented_weights() {
    let d = Duration::ZERO;
    assert!((utility(10, d, 100) - 1.0).abs() < 1e-9);
    assert!((utility(1, d, 0) - 0.4).abs() < 1e-9);
    let week = Duration::from_secs(7 * 86_400);
    assert!((utility(1, week, 0) - 0.2).abs() < 1e-9);
    assert!(utility(1, Duration::from_secs(3650 * 86_400), 0) < 1e-6);
}

#[test]
fn export_import_keeps_the_policy_not_the_evicted() {
    let mem = common::temporary().unwrap();
    for i in 0..5u8 {
        mem.episodic()
            .record(NewEpisode::new(format!("note {i}")).importance(i + 1))
            .unwrap();
    }
    let p = Retention::new()
        .max_episodes(3)
        .max_age(Duration::from_millis(86_400_500));
    mem.contexts().set_retention(p, Some("default")).unwrap();
    let mut out = Vec::new();
    mem.admin().export(&mut out).unwrap();
    let text = String::from_utf8(out.clone()).unwrap();
    assert!(text.contains("\"retention\""), "{text}");
    assert!(!text.contains("note 0") && !text.contains("note 1"));

    let other = common::temporary().unwrap();
    other.admin().import(&mut out.as_slice()).unwrap();
    assert_eq!(other.contexts().retention(Some("default")).unwrap(), p);
    assert_eq!(ids(&other).len(), 3);
    // The audit belongs to the store that evicted.
    assert!(other.contexts().evictions(None, 10).unwrap().is_empty());

    // A bad policy in a file is refused, naming the line.
    let bad = text.replace("\"max_episodes\":3", "\"max_episodes\":0");
    let third = common::temporary().unwrap();
    let err = third.admin().import(&mut bad.as_bytes()).unwrap_err();
    assert!(err.to_string().contains("max_episodes"), "{err}");
}

/// `max_age` counts from the last activity: a duplicate merged into an old
/// episode keeps it; linked duplicates are episodes like others.
#[test]
fn merged_duplicates_renew_an_episode() {
    use memstrata::episodic::OnDuplicate;
    let dir = common::tempdir();
    let clock = Arc::new(ManualClock::starting_now());
    let mem = open(&dir.path(), &clock);
    let now = memstrata::Clock::now(&*clock);
    let text = "Weekly sync with the platform team about the billing migration";
    let old = record(&mem, text, 3, now - chrono::Duration::days(10));
    let lone = record(
        &mem,
        "an unrelated old note about kayaks",
        3,
        now - chrono::Duration::days(10),
    );
    let merged = mem
        .episodic()
        .record_detailed(
            NewEpisode::new(text)
                .timestamp(now)
                .on_duplicate(OnDuplicate::Merge),
        )
        .unwrap();
    assert_eq!(merged.id, old);
    let linked = mem
        .episodic()
        .record(
            NewEpisode::new(text)
                .timestamp(now)
                .on_duplicate(OnDuplicate::Link),
        )
        .unwrap();
    mem.contexts()
        .set_retention(
            Retention::new().max_age(Duration::from_secs(5 * 86_400)),
            None,
        )
        .unwrap();
    let mut expect = vec![old, linked];
    expect.sort();
    assert_eq!(ids(&mem), expect);
    assert_eq!(mem.contexts().evictions(None, 10).unwrap()[0].id, lone);
}
