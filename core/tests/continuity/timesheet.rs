//! The LLM timesheet: punch in and out, modified files (gitignore-aware), reports.

use super::*;

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
