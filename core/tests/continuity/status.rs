//! Status and optimize: recent sessions, metrics, degraded index, purges.

use super::*;

#[test]
fn status_lists_the_most_recently_active_sessions_newest_first() {
    let dir = common::tempdir();
    let (mem, clock) = open(&dir.path());
    let st = mem.admin().status(true, false).unwrap();
    assert_eq!(st.active_sessions, Some(vec![]));
    assert_eq!(st.session_count, Some(0));

    let total = memstrata::admin::ACTIVE_SESSIONS_LIMIT + 5;
    let mut ids = Vec::new();
    for i in 0..total {
        clock.advance(Duration::from_secs(1));
        ids.push(
            mem.sessions()
                .create(&format!("s{i}"), json!({}))
                .unwrap()
                .session_id,
        );
    }
    // Saving the oldest session makes it the most recently active one.
    clock.advance(Duration::from_secs(1));
    mem.sessions().save(&ids[0], json!({"x": 1}), 1).unwrap();

    let st = mem.admin().status(true, false).unwrap();
    assert_eq!(st.session_count, Some(total as u64));
    let active = st.active_sessions.unwrap();
    assert_eq!(active.len(), memstrata::admin::ACTIVE_SESSIONS_LIMIT);
    let got: Vec<&str> = active.iter().map(|a| a.name.as_str()).collect();
    let mut want = vec!["s0".to_owned()];
    want.extend(
        (0..total)
            .rev()
            .map(|i| format!("s{i}"))
            .take(memstrata::admin::ACTIVE_SESSIONS_LIMIT - 1),
    );
    assert_eq!(got, want);
    assert_eq!(active[0].session_id, ids[0]);
    assert!(active[1].created_at > active[2].created_at);

    let bare = mem.admin().status(false, false).unwrap();
    assert_eq!((bare.active_sessions, bare.session_count), (None, None));
}

#[test]
fn status_reports_real_metrics_after_operations() {
    let dir = common::tempdir();
    let (mem, _) = open(&dir.path());
    let bare = mem.admin().status(false, false).unwrap();
    assert_eq!(bare.status, Health::Healthy);
    assert_eq!(bare.version, env!("CARGO_PKG_VERSION"));
    assert!(
        bare.active_sessions.is_none() && bare.session_count.is_none() && bare.metrics.is_none()
    );

    mem.short_term().store("a", json!(1), None).unwrap();
    mem.short_term().store("b", json!(2), None).unwrap();
    mem.working().focus("f").unwrap();
    mem.episodic()
        .record(NewEpisode::new("deployed to staging"))
        .unwrap();
    mem.semantic()
        .store("user:alice", json!({"role": "admin"}))
        .unwrap();
    let s = mem.sessions().create("s", json!({})).unwrap();
    mem.sessions()
        .save(&s.session_id, json!({"x": 1}), 1)
        .unwrap();
    mem.sessions()
        .save(&s.session_id, json!({"x": 2}), 3)
        .unwrap();
    mem.timesheet().punch_in("claude", "t", None, None).unwrap();
    mem.episodic()
        .search("staging", &SearchFilters::default(), 5)
        .unwrap();
    let _ = mem.sessions().restore("missing", None);

    let st = mem.admin().status(true, true).unwrap();
    assert_eq!(st.status, Health::Healthy, "{:?}", st.issues);
    assert_eq!(st.session_count, Some(1));
    let active = st.active_sessions.unwrap();
    assert_eq!(active.len(), 1);
    assert_eq!(
        (active[0].session_id.as_str(), active[0].name.as_str()),
        (s.session_id.as_str(), "s")
    );
    assert_eq!(active[0].created_at, s.created_at);
    assert!(st.uptime_seconds >= 0.0);
    let m = st.metrics.unwrap();
    let save = &m.operations["session.save"];
    assert_eq!(save.count, 2);
    assert!(save.max_us >= save.p50_us);
    assert_eq!(m.operations["session.restore"].errors, 1);
    assert_eq!(m.operations["short_term.store"].count, 2);
    assert_eq!(
        (
            m.items.short_term,
            m.items.working,
            m.items.episodes,
            m.items.semantic
        ),
        (2, 1, 1, 1)
    );
    assert_eq!(
        (m.items.sessions, m.items.session_versions, m.items.tasks),
        (1, 2, 1)
    );
    assert!(m.bytes_on_disk > 0);
    assert_eq!(
        m.index.documents, 2,
        "episode + knowledge after the search committed"
    );
    // The search made the changes visible with a soft commit; the durable
    // commit (and `committed_seq`) follows on the timer, on flush or close.
    assert!(m.index.applied_seq >= m.index.committed_seq);
    let v = serde_json::to_value(mem.admin().status(true, true).unwrap()).unwrap();
    assert_eq!(v["status"], json!("healthy"));
}

#[test]
fn status_is_degraded_while_the_index_lags_far_behind() {
    let dir = common::tempdir();
    let (b, _) = builder(&dir.path());
    let mem = b
        .durability(memstrata::Durability::Manual)
        .index_commit_interval(Duration::from_secs(3600))
        .open()
        .unwrap();
    let n = memstrata::admin::DEGRADED_INDEX_LAG as usize + 1;
    if common::backend_is_postgres() {
        // PostgreSQL searches in SQL: the search rows commit with the records,
        // so there is no index to lag behind. The records go in batches: the
        // point here is the status after them, and 10,001 single commits only
        // wait on the server's fsync for minutes.
        for start in (0..n).step_by(1_000) {
            let batch = (start..n.min(start + 1_000))
                .map(|i| NewEpisode::new(format!("lagging episode {i}")))
                .collect();
            mem.episodic().record_many(batch).unwrap();
        }
        let st = mem.admin().status(false, true).unwrap();
        assert_eq!(st.status, Health::Healthy, "{:?}", st.issues);
        let idx = st.metrics.unwrap().index;
        assert_eq!((idx.pending, idx.log_entries), (0, 0), "{idx:?}");
        assert_eq!(idx.documents, n as u64);
        return;
    }
    // One call per episode: every record is its own index-log entry.
    for i in 0..n {
        mem.episodic()
            .record(NewEpisode::new(format!("lagging episode {i}")))
            .unwrap();
    }
    let st = mem.admin().status(false, true).unwrap();
    assert_eq!(st.status, Health::Degraded);
    assert!(
        st.issues.iter().any(|i| i.contains("index lags")),
        "{:?}",
        st.issues
    );
    let idx = st.metrics.unwrap().index;
    assert!(
        idx.pending as usize >= n && idx.log_entries as usize >= n,
        "{idx:?}"
    );
    mem.flush().unwrap();
    let st = mem.admin().status(false, true).unwrap();
    assert_eq!(st.status, Health::Healthy, "{:?}", st.issues);
    assert_eq!(st.metrics.unwrap().index.documents, n as u64);
}

#[test]
fn optimize_purges_expired_data_and_old_versions() {
    let dir = common::tempdir();
    let (b, clock) = builder(&dir.path());
    // No background sweep during the test: optimize does the purging.
    let mem = b
        .session_retention(3)
        .sweep_interval(Duration::from_secs(3600))
        .open()
        .unwrap();
    let filler = "x".repeat(2000);
    for i in 0..3000 {
        let ctx = if i % 2 == 0 { None } else { Some("other") };
        mem.contexts()
            .store(
                &format!("tmp-{i}"),
                json!({"i": i, "pad": filler}),
                Some(Duration::from_secs(10)),
                ctx,
            )
            .unwrap();
    }
    mem.short_term()
        .store("keep", json!("forever"), None)
        .unwrap();
    let s = mem.sessions().create("s", json!({})).unwrap();
    for i in 0..40 {
        mem.sessions()
            .save(&s.session_id, agent_state(i), (i % 4) as u8)
            .unwrap();
    }
    for i in 0..50 {
        mem.episodic()
            .record(NewEpisode::new(format!("episode {i}")))
            .unwrap();
        mem.flush().unwrap(); // a commit per episode: many index segments
    }
    clock.advance(Duration::from_secs(11));

    let light = mem.admin().optimize(OptimizeLevel::Light, None).unwrap();
    assert_eq!(
        light.optimization_details["expired_items_removed"],
        json!(3000)
    );
    assert!(light.optimization_details.get("sessions").is_none());
    assert_eq!(mem.short_term().keys("").unwrap(), vec!["keep".to_owned()]);
    let st = mem.admin().status(false, true).unwrap().metrics.unwrap();
    assert_eq!(st.items.short_term, 1);
    assert_eq!(
        light.bytes_saved,
        light.optimization_details["storage"]["bytes_before"]
            .as_i64()
            .unwrap()
            - light.optimization_details["storage"]["bytes_after"]
                .as_i64()
                .unwrap()
    );

    let medium = mem
        .admin()
        .optimize("medium".parse().unwrap(), None)
        .unwrap();
    assert_eq!(
        medium.optimization_details["sessions"]["versions_pruned"],
        json!(37)
    );
    let kept: Vec<u64> = mem
        .sessions()
        .versions(&s.session_id)
        .unwrap()
        .iter()
        .map(|v| v.version)
        .collect();
    assert_eq!(kept, vec![38, 39, 40]);
    for v in 38..=40u64 {
        assert_eq!(
            mem.sessions()
                .restore(&s.session_id, Some(v))
                .unwrap()
                .content,
            agent_state(v as usize - 1)
        );
    }

    let aggressive = mem
        .admin()
        .optimize(OptimizeLevel::Aggressive, Some(&s.session_id))
        .unwrap();
    let idx = &aggressive.optimization_details["index"];
    let segments = mem
        .admin()
        .status(false, true)
        .unwrap()
        .metrics
        .unwrap()
        .index
        .segments;
    if common::backend_is_postgres() {
        // Search runs in SQL: the GIN index's pending list is cleaned instead.
        assert_eq!(idx["backend"], json!("postgresql"), "{idx}");
        assert!(idx["pending_pages_cleaned"].is_u64(), "{idx}");
        assert_eq!(segments, 0);
    } else {
        // (segments_before depends on how far tantivy's background merges got.)
        assert!(idx["segments_before"].as_u64().unwrap() >= 1, "{idx}");
        assert_eq!(idx["segments_after"], json!(1));
        assert_eq!(segments, 1);
    }
    assert_eq!(idx["documents"], json!(50));
    assert_eq!(
        mem.episodic()
            .search("episode", &SearchFilters::default(), 100)
            .unwrap()
            .len(),
        50
    );
    assert!(matches!(
        mem.admin()
            .optimize(OptimizeLevel::Light, Some("nope"))
            .unwrap_err(),
        Error::NotFound { .. }
    ));
    assert!(is_invalid(
        &"extreme".parse::<OptimizeLevel>().unwrap_err(),
        "level"
    ));
}
