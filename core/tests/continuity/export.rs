//! Export and import: identical reads after a round trip, malformed files, the reference memory
//! server's graph.

use super::*;

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
