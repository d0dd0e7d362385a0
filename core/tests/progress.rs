//! Progress reports of `optimize_with_progress` and `import_with_progress`.

use std::cell::RefCell;
use std::sync::Arc;
use std::time::Duration;

use chrono::{TimeZone, Utc};
use memstrata::{
    Durability, ManualClock, Memory, NewEpisode, admin::OptimizeLevel, admin::Progress,
};
use serde_json::json;

fn store(dir: &tempfile::TempDir, name: &str, clock: Arc<ManualClock>) -> Memory {
    Memory::builder()
        .path(dir.path().join(name))
        .clock(clock)
        .durability(Durability::Manual)
        .session_retention(2)
        .open()
        .unwrap()
}

fn clock() -> Arc<ManualClock> {
    Arc::new(ManualClock::new(
        Utc.with_ymd_and_hms(2026, 1, 1, 12, 0, 0).unwrap(),
    ))
}

/// Stages appear in `order` (each one contiguous, none repeated, optional ones may be
/// missing), `done` never decreases within a stage and never exceeds a known `total`.
/// Returns the stages seen.
fn check_reports(reports: &[Progress], order: &[&str]) -> Vec<&'static str> {
    let mut seen: Vec<&'static str> = Vec::new();
    let mut last_done = 0u64;
    for p in reports {
        if seen.last() != Some(&p.stage) {
            assert!(
                !seen.contains(&p.stage),
                "stage {} reported again after another: {reports:#?}",
                p.stage
            );
            assert_eq!(p.done, 0, "stage {} must start at done = 0", p.stage);
            seen.push(p.stage);
            last_done = 0;
        }
        assert!(
            p.done >= last_done,
            "done went backwards in {}: {reports:#?}",
            p.stage
        );
        last_done = p.done;
        if let Some(t) = p.total {
            assert!(p.done <= t, "done > total in {}: {p:?}", p.stage);
        }
        assert!(!p.message.is_empty());
    }
    let positions: Vec<usize> = seen
        .iter()
        .map(|s| {
            order
                .iter()
                .position(|o| o == s)
                .unwrap_or_else(|| panic!("unexpected stage {s}"))
        })
        .collect();
    assert!(
        positions.windows(2).all(|w| w[0] < w[1]),
        "stages out of order: {seen:?}"
    );
    seen
}

#[test]
fn optimize_reports_stages_in_order_with_monotonic_done() {
    let dir = tempfile::tempdir().unwrap();
    let c = clock();
    let mem = store(&dir, "s", c.clone());
    // More sessions than one report interval, so reports also come from inside the loop.
    let sessions = 70;
    for i in 0..sessions {
        let sid = mem
            .sessions()
            .create(&format!("s{i}"), json!({}))
            .unwrap()
            .session_id;
        for v in 0..3 {
            mem.sessions()
                .save(
                    &sid,
                    json!({"i": i, "v": v, "text": "some session content"}),
                    3,
                )
                .unwrap();
        }
    }
    for i in 0..5 {
        mem.short_term()
            .store(&format!("k{i}"), json!(i), Some(Duration::from_secs(1)))
            .unwrap();
    }
    mem.episodic()
        .record(NewEpisode::new("something happened"))
        .unwrap();
    c.advance(Duration::from_secs(10));

    let reports = RefCell::new(Vec::new());
    let report = mem
        .admin()
        .optimize_with_progress(OptimizeLevel::Aggressive, None, &|p| {
            // Callbacks run with no engine lock held: calling back into the engine is fine.
            mem.short_term().retrieve("k0").unwrap();
            reports.borrow_mut().push(p);
        })
        .unwrap();
    let reports = reports.into_inner();
    let seen = check_reports(
        &reports,
        &["sweep", "prune_sessions", "merge_index", "flush"],
    );
    assert_eq!(seen, ["sweep", "prune_sessions", "merge_index", "flush"]);

    let prune: Vec<&Progress> = reports
        .iter()
        .filter(|p| p.stage == "prune_sessions")
        .collect();
    assert!(
        prune.len() >= 3,
        "start, at least one in-loop report, end: {prune:#?}"
    );
    assert!(prune.iter().all(|p| p.total == Some(sessions)));
    assert_eq!(prune.last().unwrap().done, sessions);
    let sweep_end = reports.iter().rfind(|p| p.stage == "sweep").unwrap();
    assert_eq!(sweep_end.done, 5);
    assert_eq!(report.optimization_details["expired_items_removed"], 5);
    assert_eq!(
        report.optimization_details["sessions"]["sessions_examined"],
        sessions
    );
    assert_eq!(
        report.optimization_details["sessions"]["versions_pruned"],
        sessions
    );

    // Light reports only its own stages; the plain `optimize` still works.
    let light = RefCell::new(Vec::new());
    mem.admin()
        .optimize_with_progress(OptimizeLevel::Light, None, &|p| light.borrow_mut().push(p))
        .unwrap();
    assert_eq!(
        check_reports(
            &light.into_inner(),
            &["sweep", "prune_sessions", "merge_index", "flush"]
        ),
        ["sweep", "flush"]
    );
    mem.admin().optimize(OptimizeLevel::Medium, None).unwrap();
}

#[test]
fn import_reports_validate_then_apply() {
    let dir = tempfile::tempdir().unwrap();
    let src = store(&dir, "src", clock());
    for i in 0..150 {
        src.short_term()
            .store(&format!("k{i}"), json!(i), None)
            .unwrap();
    }
    for i in 0..300 {
        src.episodic()
            .record(NewEpisode::new(format!("episode {i}")))
            .unwrap();
    }
    for i in 0..5 {
        src.semantic()
            .store(&format!("fact{i}"), json!({"n": i}))
            .unwrap();
    }
    let mut buf = Vec::new();
    let exported = src.admin().export(&mut buf).unwrap();

    let dst = store(&dir, "dst", clock());
    let reports = RefCell::new(Vec::new());
    let stats = dst
        .admin()
        .import_with_progress(&mut buf.as_slice(), &|p| {
            dst.admin().status(false, false).unwrap();
            reports.borrow_mut().push(p);
        })
        .unwrap();
    let reports = reports.into_inner();
    assert_eq!(
        check_reports(&reports, &["validate", "apply"]),
        ["validate", "apply"]
    );
    let validate_end = reports.iter().rfind(|p| p.stage == "validate").unwrap();
    assert_eq!(
        validate_end.done,
        exported.records + 1,
        "lines = header + records"
    );
    let apply: Vec<&Progress> = reports.iter().filter(|p| p.stage == "apply").collect();
    assert!(apply.len() > 3, "periodic apply reports: {apply:#?}");
    assert!(apply.iter().all(|p| p.total == Some(stats.records)));
    assert_eq!(apply.last().unwrap().done, stats.records);
    assert_eq!(dst.short_term().retrieve("k149").unwrap(), Some(json!(149)));

    // A bad file reports validation and fails before applying anything.
    let bad = RefCell::new(Vec::new());
    let err = dst
        .admin()
        .import_with_progress(&mut &b"not json\n"[..], &|p| bad.borrow_mut().push(p))
        .unwrap_err();
    assert!(
        matches!(err, memstrata::Error::InvalidInput { .. }),
        "{err:?}"
    );
    assert!(bad.into_inner().iter().all(|p| p.stage == "validate"));
}
