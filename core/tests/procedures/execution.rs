//! Execution: branches, loops and the step limit, built-in and host actions, failures.

use super::*;

#[test]
fn branching_follows_the_first_true_condition() {
    let (_d, mem) = store();
    let p = mem.procedural();
    let proc_ = p.learn("triage", triage_steps()).unwrap();
    assert_eq!(proc_.version, 1);
    assert_eq!(proc_.steps.len(), 3);

    let high = p
        .execute(
            "triage",
            json!({"severity": "high", "count": 1, "service": "api"}),
            &no_actions(),
        )
        .unwrap();
    assert_eq!(high.status, RunStatus::Completed, "{:?}", high.error);
    assert_eq!(step_ids(&high), ["start", "page"]);
    assert_eq!(
        high.outputs["page"],
        json!({"msg": "paging on-call for api"})
    );
    assert_eq!(high.steps_executed, 2);
    assert!(high.finished_at.is_some());
    assert!(high.pending.is_none());

    let many = p
        .execute(
            "triage",
            json!({"severity": "low", "count": 3, "service": "db"}),
            &no_actions(),
        )
        .unwrap();
    assert_eq!(many.status, RunStatus::Completed);
    assert_eq!(step_ids(&many), ["start", "batch"]);
    assert_eq!(many.outputs["batch"], json!({"msg": "queued 6 items"}));

    // No condition true: the run ends after the branching step.
    let few = p
        .execute(
            "triage",
            json!({"severity": "low", "count": 1, "service": "db"}),
            &no_actions(),
        )
        .unwrap();
    assert_eq!(few.status, RunStatus::Completed);
    assert_eq!(step_ids(&few), ["start"]);
    assert_eq!(few.outputs["start"], json!({"severity": "low", "n": 2}));
}

#[test]
fn unconditional_next_chains_steps() {
    let (_d, mem) = store();
    let p = mem.procedural();
    p.learn(
        "chain",
        vec![
            Step::new("a", "set").parameters(json!({"v": 1})).then("b"),
            Step::new("b", "set")
                .parameters(json!({"v": "{{ last.v + 1 }}"}))
                .then("c"),
            Step::new("c", "set").parameters(json!({"v": "{{ last.v + steps.a.output.v }}"})),
        ],
    )
    .unwrap();
    let run = p.execute("chain", Value::Null, &no_actions()).unwrap();
    assert_eq!(run.status, RunStatus::Completed);
    assert_eq!(step_ids(&run), ["a", "b", "c"]);
    assert_eq!(run.outputs["c"], json!({"v": 3}));
    assert_eq!(run.params, json!({}));
}

#[test]
fn a_runaway_loop_fails_at_the_step_limit() {
    let (_d, mem) = store_with(Limits {
        max_steps: 20,
        ..Default::default()
    });
    let p = mem.procedural();
    p.learn(
        "spin",
        vec![
            Step::new("loop", "set")
                .parameters(json!({"i": "{{ last == null ? 1 : last.i + 1 }}"}))
                .branch("true", "loop"),
        ],
    )
    .unwrap();
    let run = p.execute("spin", json!({}), &no_actions()).unwrap();
    assert_eq!(run.status, RunStatus::Failed);
    let err = run.error.clone().unwrap();
    assert!(err.contains("max_steps") && err.contains("20"), "{err}");
    assert!(err.contains("\"loop\""), "{err}");
    assert_eq!(run.steps_executed, 20);
    assert_eq!(run.trace.len(), 20);
    assert_eq!(run.outputs["loop"], json!({"i": 20}));
}

#[test]
fn a_bounded_loop_completes() {
    let (_d, mem) = store_with(Limits {
        max_steps: 20,
        ..Default::default()
    });
    let p = mem.procedural();
    p.learn(
        "count",
        vec![
            Step::new("init", "set")
                .parameters(json!({"i": 0}))
                .then("inc"),
            Step::new("inc", "set")
                .parameters(json!({"i": "{{ last.i + 1 }}"}))
                .branch("last.i < params.target", "inc")
                .branch("last.i >= params.target", "done"),
            Step::new("done", "set").parameters(json!({"total": "{{ steps.inc.output.i }}"})),
        ],
    )
    .unwrap();
    let run = p
        .execute("count", json!({"target": 5}), &no_actions())
        .unwrap();
    assert_eq!(run.status, RunStatus::Completed, "{:?}", run.error);
    assert_eq!(run.outputs["done"], json!({"total": 5}));
    assert_eq!(run.steps_executed, 7);
}

#[test]
fn built_in_actions_touch_memory_in_the_runs_context() {
    let (_d, mem) = store();
    let proj = mem.namespace("proj").unwrap();
    let p = proj.procedural();
    p.learn(
        "onboard",
        vec![
            Step::new("remember", "short_term.store")
                .parameters(json!({"key": "draft", "value": {"text": "{{ params.text }}"}, "ttl": 3600}))
                .then("recall"),
            Step::new("recall", "short_term.retrieve").parameters(json!({"key": "draft"})).then("learn"),
            Step::new("learn", "semantic.store")
                .parameters(json!({"key": "user:{{ params.user }}", "knowledge": {"name": "{{ params.name }}"}}))
                .then("lookup"),
            Step::new("lookup", "semantic.retrieve").parameters(json!({"key": "user:{{ params.user }}"})).then("log"),
            Step::new("log", "episodic.record")
                .parameters(json!({
                    "summary": "Met {{ params.name }} about onboarding",
                    "content": {"notes": "{{ steps.recall.output.text }}"},
                    "participants": ["{{ params.name }}"],
                    "tags": ["meeting"],
                    "importance": 7
                }))
                .then("find"),
            Step::new("find", "episodic.search")
                .parameters(json!({"query": "onboarding", "tags": ["meeting"], "limit": 5}))
                .then("focus"),
            Step::new("focus", "working.focus").parameters(json!({"item": "ticket-42"})).then("note"),
            Step::new("note", "workspace.add").parameters(json!({"value": {"found": "{{ size(steps.find.output.hits) }}"}})),
        ],
    )
    .unwrap();
    let run = p
        .execute(
            "onboard",
            json!({"text": "hello", "user": 1, "name": "Ada"}),
            &no_actions(),
        )
        .unwrap();
    assert_eq!(run.status, RunStatus::Completed, "{:?}", run.error);
    assert_eq!(run.context, "proj");
    assert_eq!(run.outputs["recall"], json!({"text": "hello"}));
    assert_eq!(run.outputs["lookup"], json!({"name": "Ada"}));
    assert_eq!(run.outputs["focus"], json!({"added": true}));
    let episode_id = run.outputs["log"]["id"].as_str().unwrap().to_owned();
    let hits = run.outputs["find"]["hits"].as_array().unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0]["episode"]["id"], json!(episode_id));
    assert_eq!(run.outputs["note"]["id"].as_str().map(str::len), Some(36));

    // Visible through the public API of the run's context...
    let entry = proj.short_term().entry("draft").unwrap().unwrap();
    assert_eq!(entry.value, json!({"text": "hello"}));
    assert!(entry.expires_at.is_some());
    assert_eq!(
        proj.semantic().retrieve("user:1").unwrap(),
        Some(json!({"name": "Ada"}))
    );
    let ep = proj.episodic().get(&episode_id).unwrap().unwrap();
    assert_eq!(ep.summary, "Met Ada about onboarding");
    assert_eq!(ep.participants, vec!["Ada"]);
    assert_eq!(ep.importance, 7);
    assert_eq!(ep.content, json!({"notes": "hello"}));
    assert_eq!(proj.working().current_focus().unwrap(), vec!["ticket-42"]);
    assert_eq!(
        proj.working().workspace().unwrap(),
        vec![json!({"found": 1})]
    );
    // ...and not in another context.
    assert_eq!(mem.short_term().retrieve("draft").unwrap(), None);
    assert_eq!(mem.semantic().retrieve("user:1").unwrap(), None);
    assert!(mem.working().current_focus().unwrap().is_empty());
}

#[test]
fn a_bad_built_in_parameter_fails_the_run_not_the_call() {
    let (_d, mem) = store();
    let p = mem.procedural();
    p.learn(
        "broken",
        vec![
            Step::new("ok", "set")
                .parameters(json!({"x": 1}))
                .then("save"),
            Step::new("save", "short_term.store")
                .parameters(json!({"value": 1}))
                .then("never"),
            Step::new("never", "set"),
        ],
    )
    .unwrap();
    let run = p.execute("broken", json!({}), &no_actions()).unwrap();
    assert_eq!(run.status, RunStatus::Failed);
    let err = run.error.clone().unwrap();
    assert!(
        err.contains("\"save\"") && err.contains("parameters.key is required"),
        "{err}"
    );
    assert_eq!(step_ids(&run).len(), 2);
    assert_eq!(run.trace[1].error.as_deref(), Some(err.as_str()));
    assert_eq!(run.trace[1].output, Value::Null);
    assert!(!run.outputs.contains_key("never"));

    // Engine-side validation errors (an empty key) fail the step the same way.
    p.learn(
        "empty-key",
        vec![Step::new("save", "semantic.store").parameters(json!({"key": "", "knowledge": 1}))],
    )
    .unwrap();
    let run = p.execute("empty-key", json!({}), &no_actions()).unwrap();
    assert_eq!(run.status, RunStatus::Failed);
    assert!(run.error.unwrap().contains("must not be empty"));
}

#[test]
fn the_fail_action_fails_the_run_with_its_message() {
    let (_d, mem) = store();
    let p = mem.procedural();
    p.learn(
        "guard",
        vec![
            Step::new("check", "set")
                .parameters(json!({"budget": "{{ params.budget }}"}))
                .branch("last.budget <= 0", "stop")
                .branch("last.budget > 0", "spend"),
            Step::new("stop", "fail")
                .parameters(json!({"message": "no budget left ({{ params.budget }})"})),
            Step::new("spend", "set").parameters(json!({"spent": true})),
        ],
    )
    .unwrap();
    let run = p
        .execute("guard", json!({"budget": 0}), &no_actions())
        .unwrap();
    assert_eq!(run.status, RunStatus::Failed);
    assert_eq!(run.error.as_deref(), Some("no budget left (0)"));
    let run = p
        .execute("guard", json!({"budget": 3}), &no_actions())
        .unwrap();
    assert_eq!(run.status, RunStatus::Completed);
}

#[test]
fn host_actions_per_call_and_registered() {
    let (_d, mem) = store();
    let p = mem.procedural();
    let greeted = Arc::new(AtomicUsize::new(0));
    let g = Arc::clone(&greeted);
    p.register_action(
        "greet",
        action(move |params| {
            g.fetch_add(1, Ordering::SeqCst);
            Ok(json!({"greeting": format!("hello {}", params["name"].as_str().unwrap_or("?"))}))
        }),
    )
    .unwrap();
    assert_eq!(p.registered_actions(), vec!["greet"]);
    p.learn(
        "hello",
        vec![
            Step::new("double", "math.double")
                .parameters(json!({"x": "{{ params.x }}"}))
                .then("greet"),
            Step::new("greet", "greet").parameters(json!({"name": "{{ params.name }}"})),
        ],
    )
    .unwrap();
    let mut actions = Actions::new();
    actions.insert(
        "math.double".into(),
        action(|params| {
            let x = params["x"].as_i64().ok_or("x must be an integer")?;
            Ok(json!({"x": x * 2}))
        }),
    );
    let run = p
        .execute("hello", json!({"x": 21, "name": "Ada"}), &actions)
        .unwrap();
    assert_eq!(run.status, RunStatus::Completed, "{:?}", run.error);
    assert_eq!(run.outputs["double"], json!({"x": 42}));
    assert_eq!(run.outputs["greet"], json!({"greeting": "hello Ada"}));
    assert_eq!(greeted.load(Ordering::SeqCst), 1);

    // A per-call handler shadows the registered one.
    let mut shadow = actions.clone();
    shadow.insert("greet".into(), action(|_| Ok(json!("shadowed"))));
    let run = p
        .execute("hello", json!({"x": 1, "name": "Bo"}), &shadow)
        .unwrap();
    assert_eq!(run.outputs["greet"], json!("shadowed"));
    assert_eq!(greeted.load(Ordering::SeqCst), 1);

    // The handler's own error fails the run with its message.
    let run = p
        .execute("hello", json!({"x": "NaN", "name": "Ada"}), &actions)
        .unwrap();
    assert_eq!(run.status, RunStatus::Failed);
    let err = run.error.clone().unwrap();
    assert!(
        err.contains("x must be an integer") && err.contains("\"double\""),
        "{err}"
    );

    // Built-in names are reserved.
    let (field, _) = invalid(p.register_action("set", action(|_| Ok(Value::Null))));
    assert_eq!(field, "name");
    let mut bad = Actions::new();
    bad.insert("episodic.record".into(), action(|_| Ok(Value::Null)));
    let (field, _) = invalid(p.execute("hello", json!({}), &bad));
    assert_eq!(field, "actions");

    assert!(p.unregister_action("greet"));
    assert!(!p.unregister_action("greet"));
}

#[test]
fn a_panicking_host_action_fails_the_step() {
    let (_d, mem) = store();
    let p = mem.procedural();
    p.learn(
        "explode",
        vec![
            Step::new("boom", "boom").then("after"),
            Step::new("after", "set"),
        ],
    )
    .unwrap();
    let mut actions = Actions::new();
    actions.insert("boom".into(), action(|_| panic!("kaboom in handler")));
    let run = p.execute("explode", json!({}), &actions).unwrap();
    assert_eq!(run.status, RunStatus::Failed);
    let err = run.error.clone().unwrap();
    assert!(
        err.contains("panicked") && err.contains("kaboom in handler"),
        "{err}"
    );
    assert_eq!(step_ids(&run), ["boom"]);
    // The engine is still usable afterwards.
    let run = p
        .execute("explode", json!({}), &{
            let mut a = Actions::new();
            a.insert("boom".into(), action(|_| Ok(json!(1))));
            a
        })
        .unwrap();
    assert_eq!(run.status, RunStatus::Completed);
}
