//! Sessions: versions at every compression level, retention pruning, concurrent saves, errors.

use super::*;

#[test]
fn session_versions_round_trip_at_every_level() {
    let dir = common::tempdir();
    let (mem, _) = open(&dir.path());
    for level in 0..=3u8 {
        let s = mem
            .sessions()
            .create(&format!("level {level}"), json!({"level": level}))
            .unwrap();
        let contents: Vec<Value> = vec![
            agent_state(1),
            agent_state(2),
            json!(null),
            json!("just a string"),
            agent_state(3),
            agent_state(3),
            json!([1, -2, 3.5, {"x": [true, false]}]),
        ];
        for (i, c) in contents.iter().enumerate() {
            let saved = mem
                .sessions()
                .save(&s.session_id, c.clone(), level)
                .unwrap();
            assert_eq!(
                saved.version,
                i as u64 + 1,
                "versions are 1, 2, 3… per session"
            );
        }
        for (i, c) in contents.iter().enumerate() {
            let r = mem
                .sessions()
                .restore(&s.session_id, Some(i as u64 + 1))
                .unwrap();
            assert_eq!(&r.content, c, "level {level} version {}", i + 1);
            assert_eq!(r.version, i as u64 + 1);
            assert_eq!(r.metadata, json!({"level": level}));
        }
        let latest = mem.sessions().restore(&s.session_id, None).unwrap();
        assert_eq!(latest.version, contents.len() as u64);
        assert_eq!(&latest.content, contents.last().unwrap());
        let infos = mem.sessions().versions(&s.session_id).unwrap();
        assert_eq!(infos.len(), contents.len());
        assert!(infos.iter().all(|i| i.compression_level == level));
    }
}

#[test]
fn compression_levels_are_real_and_different() {
    let dir = common::tempdir();
    let (mem, _) = open(&dir.path());
    let content = agent_state(40);
    let mut stored = Vec::new();
    for level in 0..=2u8 {
        let s = mem.sessions().create("same content", json!({})).unwrap();
        mem.sessions()
            .save(&s.session_id, content.clone(), level)
            .unwrap();
        let info = &mem.sessions().versions(&s.session_id).unwrap()[0];
        stored.push((info.raw_bytes, info.stored_bytes));
    }
    let raw = stored[0].0;
    assert!(
        stored.iter().all(|(r, _)| *r == raw),
        "raw size is the same content at every level"
    );
    assert!(stored[0].1 >= raw, "level 0 stores the raw MessagePack");
    assert!(
        stored[1].1 < stored[0].1 / 2,
        "level 1 compresses: {stored:?}"
    );
    assert!(
        stored[2].1 < stored[1].1,
        "level 2 is smaller than level 1: {stored:?}"
    );

    // Level 3: a small change on top of the previous version stores a small delta.
    let s = mem.sessions().create("delta", json!({})).unwrap();
    mem.sessions()
        .save(&s.session_id, content.clone(), 3)
        .unwrap();
    let mut changed = content.clone();
    changed["state"]["step"] = json!(41);
    changed["messages"]
        .as_array_mut()
        .unwrap()
        .push(json!({"role": "user", "content": "one more"}));
    mem.sessions()
        .save(&s.session_id, changed.clone(), 3)
        .unwrap();
    let infos = mem.sessions().versions(&s.session_id).unwrap();
    assert!(
        infos[1].stored_bytes * 10 < stored[2].1,
        "a delta is far smaller than a full level-2 copy: {} vs {}",
        infos[1].stored_bytes,
        stored[2].1
    );
    assert_eq!(
        mem.sessions()
            .restore(&s.session_id, Some(2))
            .unwrap()
            .content,
        changed
    );
    assert_eq!(
        mem.sessions()
            .restore(&s.session_id, Some(1))
            .unwrap()
            .content,
        content
    );
}

#[test]
fn old_versions_restore_exactly_after_many_saves_and_reopen() {
    let dir = common::tempdir();
    let sid;
    {
        let (mem, _) = open(&dir.path());
        sid = mem
            .sessions()
            .create("long", json!({"k": 1}))
            .unwrap()
            .session_id;
        // 60 saves: long delta chains (keyframes forced past 16) and mixed levels.
        for i in 0..60 {
            let level = if i % 10 == 9 { (i / 10 % 3) as u8 } else { 3 };
            mem.sessions().save(&sid, agent_state(i), level).unwrap();
        }
    }
    let (mem, _) = open(&dir.path());
    for v in [1u64, 2, 16, 17, 18, 33, 40, 59, 60] {
        let r = mem.sessions().restore(&sid, Some(v)).unwrap();
        assert_eq!(r.content, agent_state(v as usize - 1), "version {v}");
    }
    let list = mem.sessions().list().unwrap();
    let info = list.iter().find(|s| s.session_id == sid).unwrap();
    assert_eq!(info.latest_version, Some(60));
    assert_eq!(info.version_count, 60);
    assert_eq!(info.name, "long");
}

#[test]
fn retention_pruning_keeps_every_remaining_version_exact() {
    let dir = common::tempdir();
    let (b, _) = builder(&dir.path());
    let mem = b.session_retention(5).open().unwrap();
    let a = mem.sessions().create("a", json!({})).unwrap().session_id;
    let other = mem.sessions().create("b", json!({})).unwrap().session_id;
    for i in 0..30 {
        mem.sessions().save(&a, agent_state(i), 3).unwrap();
        mem.sessions().save(&other, agent_state(i), 1).unwrap();
    }
    // Only the target session is pruned.
    let report = mem
        .admin()
        .optimize(OptimizeLevel::Medium, Some(&a))
        .unwrap();
    assert_eq!(
        report.optimization_details["sessions"]["versions_pruned"],
        json!(25)
    );
    let kept: Vec<u64> = mem
        .sessions()
        .versions(&a)
        .unwrap()
        .iter()
        .map(|v| v.version)
        .collect();
    assert_eq!(kept, vec![26, 27, 28, 29, 30]);
    assert_eq!(mem.sessions().versions(&other).unwrap().len(), 30);
    for v in 26..=30u64 {
        assert_eq!(
            mem.sessions().restore(&a, Some(v)).unwrap().content,
            agent_state(v as usize - 1)
        );
    }
    let err = mem.sessions().restore(&a, Some(3)).unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }), "{err}");
    assert!(
        err.to_string().contains("version 3") && err.to_string().contains("26..=30"),
        "{err}"
    );

    // Saving after a prune continues the numbering and deltas against the kept versions.
    let s = mem.sessions().save(&a, agent_state(30), 3).unwrap();
    assert_eq!(s.version, 31);
    assert_eq!(
        mem.sessions().restore(&a, None).unwrap().content,
        agent_state(30)
    );

    // All sessions.
    mem.admin().optimize(OptimizeLevel::Medium, None).unwrap();
    let kept: Vec<u64> = mem
        .sessions()
        .versions(&other)
        .unwrap()
        .iter()
        .map(|v| v.version)
        .collect();
    assert_eq!(kept, vec![26, 27, 28, 29, 30]);
    assert_eq!(
        mem.sessions().restore(&other, Some(26)).unwrap().content,
        agent_state(25)
    );
    assert_eq!(
        mem.sessions().restore(&a, Some(27)).unwrap().content,
        agent_state(26)
    );
}

#[test]
fn concurrent_saves_get_distinct_versions_that_restore_exactly() {
    let dir = common::tempdir();
    let (mem, _) = open(&dir.path());
    let sid = mem
        .sessions()
        .create("shared", json!({}))
        .unwrap()
        .session_id;
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let mem = mem.clone();
            let sid = sid.clone();
            std::thread::spawn(move || {
                (0..10)
                    .map(|i| {
                        let mut c = agent_state(i);
                        c["thread"] = json!(t);
                        let v = mem
                            .sessions()
                            .save(&sid, c.clone(), 3 - (i % 2) as u8)
                            .unwrap()
                            .version;
                        // Reads interleave with other threads' saves.
                        assert_eq!(mem.sessions().restore(&sid, Some(v)).unwrap().content, c);
                        (v, c)
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut all: Vec<(u64, Value)> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    all.sort_by_key(|(v, _)| *v);
    assert_eq!(
        all.iter().map(|(v, _)| *v).collect::<Vec<_>>(),
        (1..=40).collect::<Vec<u64>>()
    );
    for (v, c) in &all {
        assert_eq!(
            &mem.sessions().restore(&sid, Some(*v)).unwrap().content,
            c,
            "version {v}"
        );
    }
}

#[test]
fn restores_racing_with_pruning_never_see_a_missing_base() {
    let dir = common::tempdir();
    let (b, _) = builder(&dir.path());
    let mem = b.session_retention(2).open().unwrap();
    let sid = mem
        .sessions()
        .create("raced", json!({}))
        .unwrap()
        .session_id;
    mem.sessions().save(&sid, agent_state(0), 3).unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (mem, sid, stop) = (mem.clone(), sid.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut n = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    // The newest version is never pruned; it must always restore exactly.
                    let r = mem.sessions().restore(&sid, None).unwrap();
                    assert_eq!(r.content, agent_state(r.version as usize - 1));
                    n += 1;
                }
                n
            })
        })
        .collect();
    for i in 1..40 {
        mem.sessions().save(&sid, agent_state(i), 3).unwrap();
        mem.admin()
            .optimize(OptimizeLevel::Medium, Some(&sid))
            .unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for r in readers {
        assert!(r.join().unwrap() > 0);
    }
    let kept: Vec<u64> = mem
        .sessions()
        .versions(&sid)
        .unwrap()
        .iter()
        .map(|v| v.version)
        .collect();
    assert_eq!(kept, vec![39, 40]);
}

#[test]
fn session_errors_and_delete() {
    let dir = common::tempdir();
    let (mem, _) = open(&dir.path());
    let err = mem.sessions().restore("no-such-session", None).unwrap_err();
    assert!(
        matches!(err, Error::NotFound { .. }) && err.to_string().contains("no-such-session"),
        "{err}"
    );
    assert!(matches!(
        mem.sessions()
            .save("no-such-session", json!(1), 0)
            .unwrap_err(),
        Error::NotFound { .. }
    ));
    assert!(matches!(
        mem.sessions().versions("no-such-session").unwrap_err(),
        Error::NotFound { .. }
    ));

    let s = mem.sessions().create("s", json!({"repo": "x"})).unwrap();
    let err = mem.sessions().restore(&s.session_id, None).unwrap_err();
    assert!(err.to_string().contains("no saved versions"), "{err}");
    let err = mem.sessions().save(&s.session_id, json!(1), 4).unwrap_err();
    assert!(is_invalid(&err, "compression_level"), "{err}");
    assert!(is_invalid(
        &mem.sessions().create("", json!({})).unwrap_err(),
        "name"
    ));

    mem.sessions()
        .save(&s.session_id, json!({"a": 1}), 2)
        .unwrap();
    mem.sessions()
        .save(&s.session_id, json!({"a": 2}), 3)
        .unwrap();
    let err = mem.sessions().restore(&s.session_id, Some(9)).unwrap_err();
    assert!(
        err.to_string().contains("version 9") && err.to_string().contains("1..=2"),
        "{err}"
    );

    assert!(mem.sessions().delete(&s.session_id).unwrap());
    assert!(!mem.sessions().delete(&s.session_id).unwrap());
    assert!(mem.sessions().list().unwrap().is_empty());
    assert!(matches!(
        mem.sessions().restore(&s.session_id, Some(1)).unwrap_err(),
        Error::NotFound { .. }
    ));
    let st = mem.admin().status(true, true).unwrap();
    assert_eq!(
        st.metrics.unwrap().items.session_versions,
        0,
        "delete removes every version"
    );
}
