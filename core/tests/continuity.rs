//! Continuity features on real stores: sessions, contexts, timesheet, status, optimize,
//! export / import.

mod common;

use std::fs::File;
use std::io::{BufReader, Cursor};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use memstrata::{
    Error, ManualClock, Memory, MemoryBuilder, NewEpisode, SearchFilters, admin::Health,
    admin::OptimizeLevel, procedural::Actions, procedural::RunStatus, procedural::Step,
    timesheet::TaskFilter, timesheet::TaskStatus, timesheet::TaskStatusFilter,
};
use serde_json::{Value, json};

fn builder(dir: &Path) -> (MemoryBuilder, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::starting_now());
    (
        Memory::builder()
            .path(common::store_under(dir, "store"))
            .clock(clock.clone()),
        clock,
    )
}

fn open(dir: &Path) -> (Memory, Arc<ManualClock>) {
    let (b, clock) = builder(dir);
    (b.open().unwrap(), clock)
}

/// A realistic, growing agent state for save number `i`.
fn agent_state(i: usize) -> Value {
    let messages: Vec<Value> = (0..(i * 3 + 1))
        .map(|m| {
            let role = ["user", "assistant", "tool"][m % 3];
            json!({
                "role": role,
                "content": format!("message {m}: the index commit for segment {} failed after retry {}; check the writer lock", m * 7 % 13, m % 4),
                "tokens": 40 + m * 3,
                "score": (m as f64) / 8.0,
            })
        })
        .collect();
    json!({
        "agent": {"name": "claude", "temperature": 0.2},
        "messages": messages,
        "state": {"step": i, "done": i.is_multiple_of(2), "files": ["src/lib.rs", format!("src/mod{}.rs", i % 5)], "neg": -(i as i64), "big": u64::MAX, "unicode": "héllo 🦀"},
        "empty": {"list": [], "map": {}, "null": null},
    })
}

fn export_lines(mem: &Memory) -> Vec<String> {
    let mut out = Vec::new();
    mem.admin().export(&mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    // Skip the header (it carries `exported_at`).
    text.lines().skip(1).map(str::to_owned).collect()
}

fn is_invalid(err: &Error, needle: &str) -> bool {
    matches!(err, Error::InvalidInput { .. }) && err.to_string().contains(needle)
}

// ---------------------------------------------------------------------------
// sessions

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

// ---------------------------------------------------------------------------
// contexts

#[test]
fn context_store_ttl_follows_the_injected_clock() {
    let dir = common::tempdir();
    let (mem, clock) = open(&dir.path());
    let stored = mem
        .contexts()
        .store(
            "k",
            json!({"v": 1}),
            Some(Duration::from_secs(60)),
            Some("proj"),
        )
        .unwrap();
    let expires = stored.expires_at.unwrap();
    assert_eq!(expires - clock_now(&clock), chrono::Duration::seconds(60));
    mem.contexts().store("plain", json!(2), None, None).unwrap();

    let got = mem.contexts().retrieve("k", Some("proj")).unwrap().unwrap();
    assert_eq!(got.value, json!({"v": 1}));
    assert_eq!(got.expires_at, Some(expires));
    assert!(
        mem.contexts().retrieve("k", None).unwrap().is_none(),
        "other context"
    );
    // It is the short-term layer of that context.
    assert_eq!(
        mem.namespace("proj")
            .unwrap()
            .short_term()
            .retrieve("k")
            .unwrap(),
        Some(json!({"v": 1}))
    );

    clock.advance(Duration::from_secs(59));
    assert!(
        mem.contexts()
            .retrieve("k", Some("proj"))
            .unwrap()
            .is_some()
    );
    clock.advance(Duration::from_secs(2));
    assert!(
        mem.contexts()
            .retrieve("k", Some("proj"))
            .unwrap()
            .is_none(),
        "expired after the TTL"
    );
    let plain = mem.contexts().retrieve("plain", None).unwrap().unwrap();
    assert_eq!(plain.expires_at, None);

    let err = mem
        .contexts()
        .store("k", json!(1), None, Some("bad name!"))
        .unwrap_err();
    assert!(is_invalid(&err, "namespace"), "{err}");
    assert!(is_invalid(
        &mem.contexts().retrieve("k", Some("")).unwrap_err(),
        "namespace"
    ));
    assert!(is_invalid(
        &mem.contexts()
            .store("k", json!(1), Some(Duration::ZERO), None)
            .unwrap_err(),
        "ttl"
    ));
}

fn clock_now(clock: &ManualClock) -> chrono::DateTime<chrono::Utc> {
    use memstrata::Clock;
    clock.now()
}

#[test]
fn switch_context_clears_or_keeps_working_memory() {
    let dir = common::tempdir();
    let (mem, _) = open(&dir.path());
    mem.working().focus("default-item").unwrap();
    mem.working().add_to_workspace(json!({"w": 1})).unwrap();

    let r = mem.switch_context("proj", false).unwrap();
    assert_eq!(r.previous_context, "default");
    assert!(!r.context_loaded, "proj held no data");
    assert_eq!(mem.active_context(), "proj");
    mem.working().focus("proj-item").unwrap();
    mem.contexts().store("pk", json!(1), None, None).unwrap();

    // preserve_current = true keeps proj's working memory for the return.
    let r = mem.switch_context("default", true).unwrap();
    assert_eq!(r.previous_context, "proj");
    assert!(
        mem.working().current_focus().unwrap().is_empty(),
        "default's working memory was cleared on leaving"
    );
    assert!(mem.working().workspace().unwrap().is_empty());
    let r = mem.switch_context("proj", true).unwrap();
    assert!(r.context_loaded, "proj holds data now");
    assert_eq!(
        mem.working().current_focus().unwrap(),
        vec!["proj-item".to_owned()]
    );
    assert_eq!(
        mem.contexts().retrieve("pk", None).unwrap().unwrap().value,
        json!(1)
    );
    assert!(mem.contexts().list().unwrap().contains(&"proj".to_owned()));
    assert!(is_invalid(
        &mem.switch_context("no spaces", true).unwrap_err(),
        "target_context"
    ));
}

// ---------------------------------------------------------------------------
// timesheet

fn touch(path: &Path, at: SystemTime) {
    if let Some(p) = path.parent() {
        std::fs::create_dir_all(p).unwrap();
    }
    std::fs::write(path, b"data").unwrap();
    File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(at)
        .unwrap();
}

#[test]
fn punch_out_detects_modified_files_honouring_gitignore_and_not_following_links() {
    let dir = common::tempdir();
    let root = dir.fs().join("workspace");
    let outside = dir.fs().join("outside");
    let (b, clock) = builder(&dir.path());
    let mem = b.workspace_root(&root).open().unwrap();

    let start = SystemTime::from(clock_now(&clock));
    let during = start + Duration::from_secs(600);
    let before = start - Duration::from_secs(86_400);
    touch(&root.join(".gitignore"), before);
    std::fs::write(root.join(".gitignore"), "*.log\nbuild/\n").unwrap();
    File::options()
        .write(true)
        .open(root.join(".gitignore"))
        .unwrap()
        .set_modified(before)
        .unwrap();
    touch(&root.join("src/changed.rs"), during);
    touch(&root.join("src/untouched.rs"), before);
    touch(&root.join("notes/deep/also changed.md"), during);
    touch(&root.join("debug.log"), during); // ignored by *.log
    touch(&root.join("build/out.bin"), during); // ignored directory
    touch(&outside.join("secret.txt"), during);
    std::os::unix::fs::symlink(outside.join("secret.txt"), root.join("link-to-file")).unwrap();
    std::os::unix::fs::symlink(&outside, root.join("link-to-dir")).unwrap();

    let t = mem
        .timesheet()
        .punch_in("claude", "write tests", None, None)
        .unwrap();
    assert_eq!(t.start_time, clock_now(&clock));
    clock.advance(Duration::from_secs(3600));
    let out = mem
        .timesheet()
        .punch_out(&t.task_id, "tests written", true)
        .unwrap();
    assert_eq!(out.duration_seconds, 3600.0);
    assert_eq!(
        out.files,
        vec![
            "notes/deep/also changed.md".to_owned(),
            "src/changed.rs".to_owned()
        ]
    );
    assert_eq!(out.files_modified, 2);

    let task = mem.timesheet().task(&t.task_id).unwrap().unwrap();
    assert_eq!(task.status, TaskStatus::Closed);
    assert_eq!(task.files, out.files);
    assert_eq!(task.duration_seconds, Some(3600.0));
}

#[test]
fn missing_workspace_root_is_a_clear_error_and_the_task_stays_open() {
    let dir = common::tempdir();
    let missing = dir.fs().join("not-there");
    let (b, _) = builder(&dir.path());
    let mem = b.workspace_root(&missing).open().unwrap();
    let t = mem
        .timesheet()
        .punch_in("gpt", "refactor", None, Some("proj"))
        .unwrap();
    let err = mem
        .timesheet()
        .punch_out(&t.task_id, "done", true)
        .unwrap_err();
    assert!(is_invalid(&err, "not-there"), "{err}");
    let still_open = mem
        .timesheet()
        .tasks(&TaskFilter {
            status: TaskStatusFilter::Open,
            ..Default::default()
        })
        .unwrap();
    assert_eq!(still_open.len(), 1);
    let out = mem
        .timesheet()
        .punch_out(&t.task_id, "done", false)
        .unwrap();
    assert_eq!(out.files_modified, 0);

    // No roots configured at all: detect_files is refused with a hint.
    let dir2 = common::tempdir();
    let (mem2, _) = open(&dir2.path());
    let t2 = mem2.timesheet().punch_in("gpt", "x", None, None).unwrap();
    assert!(is_invalid(
        &mem2
            .timesheet()
            .punch_out(&t2.task_id, "", true)
            .unwrap_err(),
        "workspace roots"
    ));
}

#[test]
fn punch_out_of_unknown_or_closed_task_fails() {
    let dir = common::tempdir();
    let (mem, _) = open(&dir.path());
    let err = mem
        .timesheet()
        .punch_out("0190-no-such-task", "x", false)
        .unwrap_err();
    assert!(
        matches!(err, Error::NotFound { .. }) && err.to_string().contains("0190-no-such-task"),
        "{err}"
    );
    let t = mem
        .timesheet()
        .punch_in("claude", "a task", None, None)
        .unwrap();
    mem.timesheet()
        .punch_out(&t.task_id, "done", false)
        .unwrap();
    let err = mem
        .timesheet()
        .punch_out(&t.task_id, "again", false)
        .unwrap_err();
    assert!(matches!(err, Error::Conflict(_)), "{err}");
    assert!(is_invalid(
        &mem.timesheet().punch_in("", "x", None, None).unwrap_err(),
        "llm_name"
    ));
    assert!(is_invalid(
        &mem.timesheet()
            .punch_in("claude", "  ", None, None)
            .unwrap_err(),
        "task_description"
    ));
    assert!(is_invalid(
        &mem.timesheet()
            .punch_in("claude", "x", None, Some("bad ctx"))
            .unwrap_err(),
        "namespace"
    ));
    // The free-text context is bounded by the value size limit only.
    let too_long = "x".repeat(memstrata::Limits::default().max_value_bytes + 1);
    assert!(matches!(
        mem.timesheet()
            .punch_in("claude", "x", Some(&too_long), None)
            .unwrap_err(),
        Error::LimitExceeded { .. }
    ));
}

#[test]
fn punch_in_context_is_free_text_and_namespace_names_the_memstrata_context() {
    let dir = common::tempdir();
    let (mem, _) = open(&dir.path());
    let text = "Additional context: the parser fails on nested lists.\nSee issue 42 — ünïcode, \"quotes\".";
    let t = mem
        .timesheet()
        .punch_in("claude", "fix the parser", Some(text), Some("proj"))
        .unwrap();
    let task = mem.timesheet().task(&t.task_id).unwrap().unwrap();
    assert_eq!(task.context.as_deref(), Some(text));
    assert_eq!(task.namespace, "proj");
    // Any text, even one that is not a valid context name, and no namespace: the active one.
    let t2 = mem
        .timesheet()
        .punch_in("gpt", "review", Some("bad ctx / not a name"), None)
        .unwrap();
    let task2 = mem.timesheet().task(&t2.task_id).unwrap().unwrap();
    assert_eq!(task2.context.as_deref(), Some("bad ctx / not a name"));
    assert_eq!(task2.namespace, "default");
    let t3 = mem
        .timesheet()
        .punch_in("gpt", "plain", None, None)
        .unwrap();
    assert_eq!(
        mem.timesheet().task(&t3.task_id).unwrap().unwrap().context,
        None
    );

    let in_proj = mem
        .timesheet()
        .tasks(&TaskFilter {
            namespace: Some("proj".into()),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(in_proj.len(), 1);
    assert_eq!(in_proj[0].context.as_deref(), Some(text));
    let v = serde_json::to_value(&in_proj[0]).unwrap();
    assert_eq!(
        (v["context"].as_str(), v["namespace"].as_str()),
        (Some(text), Some("proj"))
    );

    // The episode recorded at punch-out carries it too.
    mem.timesheet()
        .punch_out(&t.task_id, "fixed", false)
        .unwrap();
    let ep_id = mem
        .timesheet()
        .task(&t.task_id)
        .unwrap()
        .unwrap()
        .episode_id
        .unwrap();
    let ep = mem
        .namespace("proj")
        .unwrap()
        .episodic()
        .get(&ep_id)
        .unwrap()
        .unwrap();
    assert_eq!(ep.content["context"], json!(text));

    // A long text stays whole on the task; the episode gets its beginning.
    let long = "é".repeat(memstrata::timesheet::EPISODE_CONTEXT_CHARS + 10);
    let t4 = mem
        .timesheet()
        .punch_in("gpt", "long", Some(&long), None)
        .unwrap();
    mem.timesheet()
        .punch_out(&t4.task_id, "done", false)
        .unwrap();
    let task4 = mem.timesheet().task(&t4.task_id).unwrap().unwrap();
    assert_eq!(task4.context.as_deref(), Some(long.as_str()));
    let ep4 = mem
        .episodic()
        .get(&task4.episode_id.unwrap())
        .unwrap()
        .unwrap();
    let kept = ep4.content["context"].as_str().unwrap();
    assert!(long.starts_with(kept.trim_end_matches('…')));
    assert!(kept.chars().count() <= memstrata::timesheet::EPISODE_CONTEXT_CHARS);
}

#[test]
fn finished_tasks_become_episodes_and_feed_the_report() {
    let dir = common::tempdir();
    let (mem, clock) = open(&dir.path());
    let t1 = mem
        .timesheet()
        .punch_in("claude", "implement sessions", None, Some("proj"))
        .unwrap();
    clock.advance(Duration::from_secs(120));
    let t2 = mem
        .timesheet()
        .punch_in("gpt", "review sessions", None, None)
        .unwrap();
    clock.advance(Duration::from_secs(60));
    mem.timesheet()
        .punch_out(&t1.task_id, "sessions implemented", false)
        .unwrap();
    let _t3 = mem
        .timesheet()
        .punch_in("claude", "still running", None, None)
        .unwrap();
    clock.advance(Duration::from_secs(30));
    mem.timesheet()
        .punch_out(&t2.task_id, "looks good", false)
        .unwrap();

    let proj = mem.namespace("proj").unwrap();
    let hits = proj
        .episodic()
        .search(
            "implement sessions",
            &SearchFilters {
                tags: vec!["task".into()],
                ..Default::default()
            },
            10,
        )
        .unwrap();
    assert_eq!(hits.len(), 1);
    let ep = &hits[0].episode;
    assert_eq!(ep.participants, vec!["claude".to_owned()]);
    assert_eq!(ep.content["summary"], json!("sessions implemented"));
    assert_eq!(ep.content["duration_seconds"], json!(180.0));
    assert_eq!(
        mem.timesheet()
            .task(&t1.task_id)
            .unwrap()
            .unwrap()
            .episode_id
            .as_deref(),
        Some(ep.id.as_str())
    );

    let claude = mem
        .timesheet()
        .tasks(&TaskFilter {
            llm_name: Some("claude".into()),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(claude.len(), 2);
    assert_eq!(claude[0].task_description, "still running", "newest first");
    let closed_in_proj = mem
        .timesheet()
        .tasks(&TaskFilter {
            namespace: Some("proj".into()),
            status: TaskStatusFilter::Closed,
            ..Default::default()
        })
        .unwrap();
    assert_eq!(closed_in_proj.len(), 1);

    let report = mem.timesheet().report(None, None).unwrap();
    assert_eq!(report.tasks, 3);
    assert_eq!(report.total_seconds, 180.0 + 90.0);
    let c = report.llms.iter().find(|l| l.llm_name == "claude").unwrap();
    assert_eq!((c.tasks, c.open_tasks, c.total_seconds), (2, 1, 180.0));
    let g = report.llms.iter().find(|l| l.llm_name == "gpt").unwrap();
    assert_eq!((g.tasks, g.open_tasks, g.total_seconds), (1, 0, 90.0));
    let later = mem.timesheet().report(Some(t2.start_time), None).unwrap();
    assert_eq!(later.tasks, 2);
}

// ---------------------------------------------------------------------------
// status and optimize

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

// ---------------------------------------------------------------------------
// export / import

fn populate(mem: &Memory, clock: &ManualClock) -> (String, String, String) {
    mem.short_term()
        .store("draft", json!({"text": "hello"}), None)
        .unwrap();
    mem.short_term()
        .store("ttl", json!(1), Some(Duration::from_secs(3600)))
        .unwrap();
    mem.short_term()
        .store("gone", json!(1), Some(Duration::from_secs(1)))
        .unwrap();
    mem.working().focus("bug #42").unwrap();
    mem.working()
        .add_to_workspace(json!({"file": "src/lib.rs"}))
        .unwrap();
    let proj = mem.namespace("proj").unwrap();
    proj.short_term()
        .store("k", json!([1, 2, 3]), None)
        .unwrap();
    proj.working().focus("proj focus").unwrap();
    mem.episodic()
        .record(
            NewEpisode::new("Deployed v2 to staging")
                .content(json!({"pr": 42}))
                .participants(["alice"])
                .tags(["deploy"])
                .importance(7),
        )
        .unwrap();
    proj.episodic()
        .record(NewEpisode::new("Planned the migration").tags(["plan"]))
        .unwrap();
    mem.semantic()
        .store("user:alice", json!({"role": "admin"}))
        .unwrap();
    clock.advance(Duration::from_secs(5));
    mem.semantic()
        .update("user:alice", json!({"team": "infra"}))
        .unwrap();
    proj.semantic()
        .store("fact", json!("the sky is blue"))
        .unwrap();

    proj.procedural()
        .learn(
            "triage",
            vec![
                Step::new("look", "lookup")
                    .parameters(json!({"id": 7}))
                    .then("note"),
                Step::new("note", "episodic.record")
                    .parameters(json!({"summary": "ticket triaged"})),
            ],
        )
        .unwrap();
    let run = proj
        .procedural()
        .execute("triage", json!({"user": "bob"}), &Actions::new())
        .unwrap();
    assert_eq!(run.status, RunStatus::AwaitingAction);

    let s = mem
        .sessions()
        .create("refactor", json!({"repo": "x"}))
        .unwrap();
    for i in 0..6 {
        mem.sessions()
            .save(&s.session_id, agent_state(i), (i % 4) as u8)
            .unwrap();
        clock.advance(Duration::from_secs(1));
    }
    let t = mem
        .timesheet()
        .punch_in(
            "claude",
            "write tests",
            Some("free text: the export suite"),
            Some("proj"),
        )
        .unwrap();
    clock.advance(Duration::from_secs(90));
    mem.timesheet()
        .punch_out(&t.task_id, "done", false)
        .unwrap();
    mem.timesheet()
        .punch_in("gpt", "still open", None, None)
        .unwrap();
    clock.advance(Duration::from_secs(2)); // "gone" expires
    (s.session_id, t.task_id, run.run_id)
}

#[test]
fn export_then_import_gives_identical_reads() {
    let dir = common::tempdir();
    let (src, clock) = open(&dir.join("a"));
    let (sid, tid, run_id) = populate(&src, &clock);
    let mut buf = Vec::new();
    let stats = src.admin().export(&mut buf).unwrap();
    assert_eq!(
        stats.counts["episode"], 3,
        "two recorded + one from the finished task"
    );
    assert_eq!(stats.counts["session"], 1);
    assert_eq!(
        stats.counts["short_term"], 3,
        "the expired item is not exported"
    );
    let header: Value = serde_json::from_str(
        String::from_utf8(buf.clone())
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(header["type"], json!("memstrata_export"));
    assert_eq!(
        header["format_version"],
        json!(memstrata::admin::EXPORT_FORMAT_VERSION)
    );

    let (b, dst_clock) = builder(&dir.join("b"));
    dst_clock.set(clock_now(&clock));
    let dst = b.open().unwrap();
    let istats = dst.admin().import(&mut Cursor::new(&buf)).unwrap();
    assert_eq!(istats.records, stats.records);
    assert_eq!(istats.counts, stats.counts);

    // Every layer reads the same.
    for (a, b) in [
        (src.clone(), dst.clone()),
        (
            src.namespace("proj").unwrap(),
            dst.namespace("proj").unwrap(),
        ),
    ] {
        for k in a.short_term().keys("").unwrap() {
            assert_eq!(
                a.short_term().entry(&k).unwrap(),
                b.short_term().entry(&k).unwrap(),
                "{k}"
            );
        }
        assert_eq!(
            a.short_term().keys("").unwrap(),
            b.short_term().keys("").unwrap()
        );
        assert_eq!(
            a.working().current_focus().unwrap(),
            b.working().current_focus().unwrap()
        );
        assert_eq!(
            a.working().workspace_items().unwrap(),
            b.working().workspace_items().unwrap()
        );
        assert_eq!(
            a.episodic().recent(100).unwrap(),
            b.episodic().recent(100).unwrap()
        );
        for ep in a.episodic().recent(100).unwrap() {
            assert_eq!(b.episodic().get(&ep.id).unwrap().as_ref(), Some(&ep));
            let hits = b
                .episodic()
                .search(&ep.summary, &SearchFilters::default(), 10)
                .unwrap();
            assert!(
                hits.iter().any(|h| h.episode == ep),
                "imported episodes are searchable: {}",
                ep.summary
            );
        }
        for k in a.semantic().keys("").unwrap() {
            assert_eq!(a.semantic().get(&k).unwrap(), b.semantic().get(&k).unwrap());
            assert_eq!(
                a.semantic().history(&k).unwrap(),
                b.semantic().history(&k).unwrap()
            );
        }
        assert_eq!(
            a.semantic().keys("").unwrap(),
            b.semantic().keys("").unwrap()
        );
        assert_eq!(
            a.procedural().list().unwrap(),
            b.procedural().list().unwrap()
        );
        for p in a.procedural().list().unwrap() {
            assert_eq!(
                a.procedural().get(&p).unwrap(),
                b.procedural().get(&p).unwrap()
            );
        }
    }
    assert_eq!(dst.semantic().history("user:alice").unwrap().len(), 2);
    let hits = dst.semantic().query("infra", 5).unwrap();
    assert_eq!(hits[0].key, "user:alice");
    assert_eq!(
        src.contexts().list().unwrap(),
        dst.contexts().list().unwrap()
    );
    assert_eq!(
        src.procedural().run(&run_id).unwrap(),
        dst.procedural().run(&run_id).unwrap()
    );
    assert_eq!(
        src.sessions().list().unwrap(),
        dst.sessions().list().unwrap()
    );
    let (va, vb) = (
        src.sessions().versions(&sid).unwrap(),
        dst.sessions().versions(&sid).unwrap(),
    );
    assert_eq!(va, vb);
    for v in &va {
        assert_eq!(
            src.sessions().restore(&sid, Some(v.version)).unwrap(),
            dst.sessions().restore(&sid, Some(v.version)).unwrap()
        );
    }
    assert_eq!(
        src.timesheet().task(&tid).unwrap(),
        dst.timesheet().task(&tid).unwrap()
    );
    let task = dst.timesheet().task(&tid).unwrap().unwrap();
    assert_eq!(
        (task.context.as_deref(), task.namespace.as_str()),
        (Some("free text: the export suite"), "proj")
    );

    // An export made before tasks had free text (no `context_text` on the task
    // line) still imports: `context` there is the namespace, the text is None.
    let text = String::from_utf8(buf.clone()).unwrap();
    assert_eq!(
        text.matches("\"context_text\"").count(),
        1,
        "written only for the task with text"
    );
    let old: String = text
        .lines()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            if v["type"] == json!("task") {
                v.as_object_mut().unwrap().remove("context_text");
            }
            format!("{v}\n")
        })
        .collect();
    let (b3, clock3) = builder(&dir.join("c"));
    clock3.set(clock_now(&clock));
    let old_dst = b3.open().unwrap();
    old_dst
        .admin()
        .import(&mut Cursor::new(old.as_bytes()))
        .unwrap();
    let task = old_dst.timesheet().task(&tid).unwrap().unwrap();
    assert_eq!((task.context, task.namespace.as_str()), (None, "proj"));
    assert_eq!(
        src.timesheet().tasks(&TaskFilter::default()).unwrap(),
        dst.timesheet().tasks(&TaskFilter::default()).unwrap()
    );

    // A paused run imported elsewhere can be resumed there.
    let resumed = dst
        .procedural()
        .resume(&run_id, json!({"found": true}), &Actions::new())
        .unwrap();
    assert_eq!(resumed.status, RunStatus::Completed);

    // And the imported store exports the same lines (header aside).
    let (src2, _) = open(&dir.join("c"));
    src2.admin().import(&mut Cursor::new(&buf)).unwrap();
    assert_eq!(export_lines(&src), export_lines(&src2));
}

#[test]
fn malformed_imports_are_rejected_and_change_nothing() {
    let dir = common::tempdir();
    let (src, clock) = open(&dir.join("a"));
    populate(&src, &clock);
    let mut good = Vec::new();
    src.admin().export(&mut good).unwrap();
    let good = String::from_utf8(good).unwrap();
    let lines: Vec<&str> = good.lines().collect();
    assert!(lines.len() > 5);

    let (dst, _) = open(&dir.join("b"));
    dst.short_term()
        .store("existing", json!("value"), None)
        .unwrap();
    dst.semantic().store("existing", json!({"v": 1})).unwrap();
    let before = export_lines(&dst);

    let mut bad_json = lines.clone();
    bad_json[2] = "{\"type\": \"episode\", \"id\": ";
    let newer = good.replacen("\"format_version\":2", "\"format_version\":3", 1);
    assert_ne!(newer, good);
    let mut episode: Value = serde_json::from_str(
        lines
            .iter()
            .find(|l| l.contains("\"type\":\"episode\""))
            .unwrap(),
    )
    .unwrap();
    episode["importance"] = json!("high");
    let wrong_type = format!("{}\n{}\n{}\n", lines[0], lines[1], episode);
    let mut bad_session: Value = serde_json::from_str(
        lines
            .iter()
            .find(|l| l.contains("\"type\":\"session\""))
            .unwrap(),
    )
    .unwrap();
    bad_session["versions"][1]["compression_level"] = json!(9);
    let bad_level = format!("{}\n{}\n{}\n", lines[0], lines[1], bad_session);
    let cases: Vec<(String, &str)> = vec![
        (bad_json.join("\n"), "line 3"),
        (newer, "format version 3"),
        (wrong_type, "line 3"),
        (bad_level, "compression_level"),
        (
            format!("{}\n{{\"type\":\"mystery\"}}\n", lines[0]),
            "line 2",
        ),
        ("{\"type\":\"episode\"}\n".to_owned(), "line 1"),
        (String::new(), "line 1"),
        (format!("{}\n{}\n", lines[0], lines[0]), "second header"),
    ];
    for (text, needle) in cases {
        let err = dst
            .admin()
            .import(&mut BufReader::new(text.as_bytes()))
            .unwrap_err();
        assert!(is_invalid(&err, needle), "expected {needle:?} in {err}");
        assert_eq!(
            export_lines(&dst),
            before,
            "a rejected import wrote nothing ({needle})"
        );
    }
    // Bytes that are not UTF-8.
    let mut bytes = format!("{}\n", lines[0]).into_bytes();
    bytes.extend_from_slice(&[0xff, 0xfe, b'\n']);
    assert!(is_invalid(
        &dst.admin().import(&mut Cursor::new(bytes)).unwrap_err(),
        "line 2"
    ));
    assert_eq!(export_lines(&dst), before);
}

#[test]
fn knowledge_graph_import_from_the_reference_memory_server() {
    let dir = common::tempdir();
    let (mem, _) = open(&dir.path());
    let kg = mem.namespace("kg").unwrap();
    kg.semantic()
        .store(
            "entity:Carol",
            json!({"entityType": "person", "observations": ["likes tea"], "relations": []}),
        )
        .unwrap();
    let jsonl = r#"{"type":"entity","name":"Alice","entityType":"person","observations":["works on search","prefers Rust"]}
{"type":"entity","name":"Acme","entityType":"organization","observations":[]}
{"type":"relation","from":"Alice","to":"Acme","relationType":"works_at"}
{"type":"relation","from":"Carol","to":"Alice","relationType":"mentors"}
{"type":"relation","from":"Dave","to":"Acme","relationType":"founded"}

{"type":"relation","from":"Alice","to":"Acme","relationType":"works_at"}
"#;
    let stats = kg
        .admin()
        .import_knowledge_graph(&mut Cursor::new(jsonl))
        .unwrap();
    assert_eq!(stats.counts["entity"], 2);
    assert_eq!(stats.counts["relation"], 4);
    assert_eq!(
        kg.semantic().retrieve("entity:Alice").unwrap(),
        Some(json!({
            "entityType": "person",
            "observations": ["works on search", "prefers Rust"],
            "relations": [{"relationType": "works_at", "to": "Acme"}],
        }))
    );
    let carol = kg.semantic().retrieve("entity:Carol").unwrap().unwrap();
    assert_eq!(
        carol["observations"],
        json!(["likes tea"]),
        "existing entity kept, relation added"
    );
    assert_eq!(
        carol["relations"],
        json!([{"relationType": "mentors", "to": "Alice"}])
    );
    let dave = kg.semantic().retrieve("entity:Dave").unwrap().unwrap();
    assert_eq!(dave["entityType"], Value::Null);
    assert_eq!(
        dave["relations"],
        json!([{"relationType": "founded", "to": "Acme"}])
    );
    let hits = kg.semantic().query("search Rust", 5).unwrap();
    assert_eq!(hits[0].key, "entity:Alice");
    assert!(
        mem.semantic().keys("entity:").unwrap().is_empty(),
        "only the active context"
    );

    let bad = "{\"type\":\"entity\",\"name\":\"Zed\",\"entityType\":\"x\",\"observations\":[]}\n{\"type\":\"relation\",\"from\":\"Zed\"}\n";
    let err = kg
        .admin()
        .import_knowledge_graph(&mut Cursor::new(bad))
        .unwrap_err();
    assert!(is_invalid(&err, "line 2"), "{err}");
    assert!(
        kg.semantic().retrieve("entity:Zed").unwrap().is_none(),
        "nothing written"
    );
}
