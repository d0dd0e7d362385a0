//! Procedural memory: learning, validation, execution, built-ins, host actions,
//! pause/resume across a reopen, and the episode every finished run leaves.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use memstrata::procedural::steps_from_json;
use memstrata::{
    Error, Limits, Memory, SearchFilters, procedural::ActionHandler, procedural::Actions,
    procedural::Next, procedural::RunStatus, procedural::Step,
};
use serde_json::{Value, json};

fn store() -> (common::TestDir, Memory) {
    let dir = common::tempdir();
    let mem = Memory::builder().path(dir.path()).open().unwrap();
    (dir, mem)
}

fn store_with(limits: Limits) -> (common::TestDir, Memory) {
    let dir = common::tempdir();
    let mem = Memory::builder()
        .path(dir.path())
        .limits(limits)
        .open()
        .unwrap();
    (dir, mem)
}

/// Open `path` again (every handle of the previous engine is gone, so the
/// store is released).
fn reopen(path: &Path) -> Memory {
    Memory::builder().path(path).open().unwrap()
}

fn action<F>(f: F) -> Arc<dyn ActionHandler>
where
    F: Fn(&Value) -> Result<Value, String> + Send + Sync + 'static,
{
    Arc::new(f)
}

fn no_actions() -> Actions {
    Actions::new()
}

fn invalid(r: memstrata::Result<impl std::fmt::Debug>) -> (String, String) {
    match r {
        Err(Error::InvalidInput { field, reason }) => (field, reason),
        other => panic!("expected InvalidInput, got {other:?}"),
    }
}

fn step_ids(run: &memstrata::procedural::Run) -> Vec<&str> {
    run.trace.iter().map(|t| t.step.as_str()).collect()
}

fn triage_steps() -> Vec<Step> {
    vec![
        Step::new("start", "set")
            .parameters(json!({"severity": "{{ params.severity }}", "n": "{{ params.count * 2 }}"}))
            .branch("last.severity == 'high'", "page")
            .branch("steps.start.output.n > 5 && params.service != ''", "batch"),
        Step::new("page", "set")
            .parameters(json!({"msg": "paging on-call for {{ params.service }}"})),
        Step::new("batch", "set")
            .parameters(json!({"msg": "queued {{ steps.start.output.n }} items"})),
    ]
}

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

fn approval_steps() -> Vec<Step> {
    vec![
        Step::new("draft", "set")
            .parameters(json!({"change": "{{ params.change }}"}))
            .then("ask"),
        Step::new("ask", "human.approve")
            .description("Ask a human to approve the change")
            .parameters(json!({"question": "Apply {{ steps.draft.output.change }}?"}))
            .branch("last.approved == true", "apply")
            .branch("last.approved == false", "reject"),
        Step::new("apply", "short_term.store")
            .parameters(json!({"key": "applied", "value": "{{ steps.draft.output.change }}"})),
        Step::new("reject", "fail").parameters(json!({"message": "rejected: {{ last.reason }}"})),
    ]
}

#[test]
fn a_paused_run_survives_reopen_and_resumes() {
    let dir = common::tempdir();
    let run_id = {
        let mem = Memory::builder().path(dir.path()).open().unwrap();
        let ops = mem.namespace("ops").unwrap();
        ops.procedural().learn("change", approval_steps()).unwrap();
        let run = ops
            .procedural()
            .execute("change", json!({"change": "raise limits"}), &no_actions())
            .unwrap();
        assert_eq!(run.status, RunStatus::AwaitingAction);
        let pending = run.pending.clone().unwrap();
        assert_eq!(pending.step, "ask");
        assert_eq!(pending.action, "human.approve");
        assert_eq!(pending.description, "Ask a human to approve the change");
        assert_eq!(
            pending.parameters,
            json!({"question": "Apply raise limits?"})
        );
        assert_eq!(step_ids(&run), ["draft"]);
        assert!(run.finished_at.is_none());
        let as_json = serde_json::to_value(&run).unwrap();
        assert_eq!(as_json["status"], json!("awaiting_action"));
        assert_eq!(as_json["pending"]["step"], json!("ask"));
        run.run_id
    };
    // Every handle is gone; open the same path again.
    let mem = reopen(&dir.path());
    let p = mem.procedural(); // the default context: runs are global
    let stored = p.run(&run_id).unwrap().unwrap();
    assert_eq!(stored.status, RunStatus::AwaitingAction);
    assert_eq!(stored.context, "ops");
    assert_eq!(step_ids(&stored), ["draft"]);

    let done = p
        .resume(&run_id, json!({"approved": true}), &no_actions())
        .unwrap();
    assert_eq!(done.status, RunStatus::Completed, "{:?}", done.error);
    assert_eq!(step_ids(&done), ["draft", "ask", "apply"]);
    assert_eq!(done.outputs["ask"], json!({"approved": true}));
    assert_eq!(
        done.trace[1].parameters,
        json!({"question": "Apply raise limits?"})
    );
    assert!(done.pending.is_none());
    let ops = mem.namespace("ops").unwrap();
    assert_eq!(
        ops.short_term().retrieve("applied").unwrap(),
        Some(json!("raise limits"))
    );
    assert_eq!(mem.short_term().retrieve("applied").unwrap(), None);

    // The finished state is persisted too.
    assert_eq!(p.run(&run_id).unwrap().unwrap(), done);

    // Resuming again is a conflict.
    match p.resume(&run_id, json!({"approved": true}), &no_actions()) {
        Err(Error::Conflict(msg)) => assert!(msg.contains("completed"), "{msg}"),
        other => panic!("expected Conflict, got {other:?}"),
    }
}

#[test]
fn resume_can_take_the_other_branch_and_pause_twice() {
    let (_d, mem) = store();
    let p = mem.procedural();
    p.learn(
        "two-questions",
        vec![
            Step::new("q1", "ask").then("q2"),
            Step::new("q2", "ask").parameters(json!({"prev": "{{ last }}"})),
        ],
    )
    .unwrap();
    let run = p
        .execute("two-questions", json!({}), &no_actions())
        .unwrap();
    assert_eq!(run.pending.as_ref().unwrap().step, "q1");
    let run = p
        .resume(&run.run_id, json!("first"), &no_actions())
        .unwrap();
    assert_eq!(run.status, RunStatus::AwaitingAction);
    assert_eq!(run.pending.as_ref().unwrap().step, "q2");
    assert_eq!(
        run.pending.as_ref().unwrap().parameters,
        json!({"prev": "first"})
    );
    // Resume may supply the handler instead of an output for later steps.
    let run = p
        .resume(&run.run_id, json!("second"), &no_actions())
        .unwrap();
    assert_eq!(run.status, RunStatus::Completed);
    assert_eq!(run.outputs["q2"], json!("second"));

    p.learn("approve", approval_steps()).unwrap();
    let run = p
        .execute("approve", json!({"change": "drop table"}), &no_actions())
        .unwrap();
    let run = p
        .resume(
            &run.run_id,
            json!({"approved": false, "reason": "too risky"}),
            &no_actions(),
        )
        .unwrap();
    assert_eq!(run.status, RunStatus::Failed);
    assert_eq!(run.error.as_deref(), Some("rejected: too risky"));
}

#[test]
fn resume_errors() {
    let (_d, mem) = store();
    let p = mem.procedural();
    match p.resume(
        "0190aaaa-0000-7000-8000-000000000000",
        json!(1),
        &no_actions(),
    ) {
        Err(Error::NotFound { what }) => assert!(what.contains("run")),
        other => panic!("expected NotFound, got {other:?}"),
    }
    assert_eq!(p.run("0190aaaa-0000-7000-8000-000000000000").unwrap(), None);
    let (field, _) = invalid(p.resume("", json!(1), &no_actions()));
    assert_eq!(field, "run_id");

    p.learn("one", vec![Step::new("a", "set")]).unwrap();
    let run = p.execute("one", json!({}), &no_actions()).unwrap();
    assert_eq!(run.status, RunStatus::Completed);
    assert!(matches!(
        p.resume(&run.run_id, json!(1), &no_actions()),
        Err(Error::Conflict(_))
    ));

    match p.execute("missing", json!({}), &no_actions()) {
        Err(Error::NotFound { what }) => assert!(what.contains("missing")),
        other => panic!("expected NotFound, got {other:?}"),
    }
    let (field, _) = invalid(p.execute("one", json!([1, 2]), &no_actions()));
    assert_eq!(field, "params");
}

#[test]
fn invalid_graphs_are_rejected_naming_the_step() {
    let (_d, mem) = store_with(Limits {
        max_procedure_steps: 3,
        ..Default::default()
    });
    let p = mem.procedural();

    let (field, _) = invalid(p.learn("empty", vec![]));
    assert_eq!(field, "steps");

    let (field, reason) = invalid(p.learn(
        "dup",
        vec![Step::new("a", "set").then("a"), Step::new("a", "set")],
    ));
    assert_eq!(field, "steps[1].id");
    assert!(
        reason.contains("duplicate") && reason.contains("\"a\""),
        "{reason}"
    );

    let (field, reason) = invalid(p.learn("dangling", vec![Step::new("a", "set").then("nowhere")]));
    assert_eq!(field, "steps[0].next");
    assert!(
        reason.contains("nowhere") && reason.contains("\"a\""),
        "{reason}"
    );

    let (field, _) = invalid(p.learn(
        "dangling-branch",
        vec![
                Step::new("a", "set"),
                Step::new("b", "set")
                    .branch("true", "a")
                    .branch("false", "zz"),
            ],
    ));
    assert_eq!(field, "steps[1].next[1].next");

    let (field, reason) = invalid(p.learn(
        "bad-cel",
        vec![
            Step::new("a", "set"),
            Step::new("b", "set"),
            Step::new("check", "set").branch("last.ok", "a").branch("last.ok &&& )", "b"),
        ],
    ));
    assert_eq!(field, "steps[2].next[1].condition");
    assert!(
        reason.contains("\"check\"") && reason.contains("does not compile"),
        "{reason}"
    );

    let (field, _) = invalid(p.learn("blank-cond", vec![Step::new("a", "set").branch("  ", "a")]));
    assert_eq!(field, "steps[0].next[0].condition");

    let (field, reason) = invalid(p.learn(
        "bad-template",
        vec![Step::new("a", "set").parameters(json!({"x": {"y": ["ok", "{{ 1 + }}"]}}))],
    ));
    assert_eq!(field, "steps[0].parameters.x.y[1]");
    assert!(reason.contains("template"), "{reason}");

    let (field, reason) = invalid(p.learn(
        "open-template",
        vec![Step::new("a", "set").parameters(json!({"x": "hello {{ name"}))],
    ));
    assert_eq!(field, "steps[0].parameters.x");
    assert!(reason.contains("unterminated"), "{reason}");

    let (field, _) = invalid(p.learn("no-action", vec![Step::new("a", "")]));
    assert_eq!(field, "steps[0].action");
    let (field, _) = invalid(p.learn("", vec![Step::new("a", "set")]));
    assert_eq!(field, "name");

    let long = format!("{} == 1", "1 + ".repeat(400));
    match p.learn("long", vec![Step::new("a", "set").branch(long, "a")]) {
        Err(Error::LimitExceeded { field, .. }) => assert_eq!(field, "steps[0].next[0].condition"),
        other => panic!("expected LimitExceeded, got {other:?}"),
    }
    let four: Vec<Step> = (0..4).map(|i| Step::new(format!("s{i}"), "set")).collect();
    match p.learn("big", four) {
        Err(Error::LimitExceeded {
            field,
            limit,
            actual,
            ..
        }) => {
            assert_eq!((field.as_str(), limit, actual), ("steps", 3, 4));
        }
        other => panic!("expected LimitExceeded, got {other:?}"),
    }
    // Nothing invalid was stored.
    assert!(p.list().unwrap().is_empty());
}

#[test]
fn learn_update_get_list_forget() {
    let (_d, mem) = store();
    let p = mem.procedural();
    p.learn("b-proc", vec![Step::new("a", "set")]).unwrap();
    p.learn("a-proc", vec![Step::new("a", "set")]).unwrap();
    match p.learn("a-proc", vec![Step::new("a", "set")]) {
        Err(Error::Conflict(msg)) => assert!(msg.contains("update"), "{msg}"),
        other => panic!("expected Conflict, got {other:?}"),
    }
    assert!(matches!(
        p.update("nope", vec![Step::new("a", "set")]),
        Err(Error::NotFound { .. })
    ));
    let v2 = p
        .update(
            "a-proc",
            vec![Step::new("x", "set").then("y"), Step::new("y", "set")],
        )
        .unwrap();
    assert_eq!(v2.version, 2);
    assert!(v2.updated_at >= v2.created_at);
    let got = p.get("a-proc").unwrap().unwrap();
    assert_eq!(got, v2);
    assert_eq!(got.steps[0].next, Some(Next::Step("y".into())));
    assert_eq!(p.list().unwrap(), vec!["a-proc", "b-proc"]);

    // Procedures are per context.
    let other = mem.namespace("other").unwrap().procedural();
    assert!(other.list().unwrap().is_empty());
    assert_eq!(other.get("a-proc").unwrap(), None);
    assert!(matches!(
        other.execute("a-proc", json!({}), &no_actions()),
        Err(Error::NotFound { .. })
    ));
    other.learn("a-proc", vec![Step::new("z", "set")]).unwrap();
    assert_eq!(p.get("a-proc").unwrap().unwrap().version, 2);

    assert!(p.forget("b-proc").unwrap());
    assert!(!p.forget("b-proc").unwrap());
    assert_eq!(p.list().unwrap(), vec!["a-proc"]);
    assert!(mem.contexts().list().unwrap().contains(&"other".to_owned()));
}

#[test]
fn a_run_keeps_the_steps_it_started_with() {
    let (_d, mem) = store();
    let p = mem.procedural();
    p.learn(
        "flow",
        vec![
            Step::new("wait", "ask").then("end"),
            Step::new("end", "set").parameters(json!({"v": 1})),
        ],
    )
    .unwrap();
    let run = p.execute("flow", json!({}), &no_actions()).unwrap();
    p.update("flow", vec![Step::new("other", "set")]).unwrap();
    let run = p.resume(&run.run_id, json!(null), &no_actions()).unwrap();
    assert_eq!(run.status, RunStatus::Completed);
    assert_eq!(run.procedure_version, 1);
    assert_eq!(run.outputs["end"], json!({"v": 1}));
}

#[test]
fn templates_whole_value_and_interpolated() {
    let (_d, mem) = store();
    let p = mem.procedural();
    p.learn(
        "tpl",
        vec![
            Step::new("first", "set")
                .parameters(json!({
                    "whole": "{{ params.obj }}",
                    "num": "{{ params.n + 1 }}",
                    "flag": "{{ params.n > 1 }}",
                    "nothing": "{{ last }}",
                    "text": "n={{ params.n }}, name={{ params.name }}, obj={{ params.obj }}, none={{ last }}",
                    "list": ["{{ params.n }}", "x{{ params.n }}", 7],
                    "literal": "{{ \"{{\" }}raw}}",
                    "spaced": " {{ params.n }}",
                    "computed": "{{ params.tags.map(t, t + '!') }}",
                    "plain": "no templates here"
                }))
                .then("second"),
            Step::new("second", "set").parameters(json!({
                "a": "{{ steps.first.output.whole.a }}",
                "len": "{{ size(steps.first.output.list) }}"
            })),
        ],
    )
    .unwrap();
    let run = p
        .execute(
            "tpl",
            json!({"n": 2, "name": "Ada", "obj": {"a": [1, 2]}, "tags": ["x", "y"]}),
            &no_actions(),
        )
        .unwrap();
    assert_eq!(run.status, RunStatus::Completed, "{:?}", run.error);
    let first = &run.outputs["first"];
    assert_eq!(first["whole"], json!({"a": [1, 2]}));
    assert_eq!(first["num"], json!(3));
    assert_eq!(first["flag"], json!(true));
    assert_eq!(first["nothing"], Value::Null);
    assert_eq!(
        first["text"],
        json!(r#"n=2, name=Ada, obj={"a":[1,2]}, none=null"#)
    );
    assert_eq!(first["list"], json!([2, "x2", 7]));
    assert_eq!(first["literal"], json!("{{raw}}"));
    assert_eq!(first["spaced"], json!(" 2"));
    assert_eq!(first["computed"], json!(["x!", "y!"]));
    assert_eq!(first["plain"], json!("no templates here"));
    assert_eq!(run.outputs["second"], json!({"a": [1, 2], "len": 3}));
    // The trace shows resolved parameters.
    assert_eq!(run.trace[1].parameters, json!({"a": [1, 2], "len": 3}));
}

#[test]
fn a_failing_template_or_condition_fails_the_run_with_a_clear_message() {
    let (_d, mem) = store();
    let p = mem.procedural();
    p.learn(
        "missing-key",
        vec![Step::new("use", "set").parameters(json!({"v": "{{ steps.nope.output }}"}))],
    )
    .unwrap();
    let run = p.execute("missing-key", json!({}), &no_actions()).unwrap();
    assert_eq!(run.status, RunStatus::Failed);
    let err = run.error.clone().unwrap();
    assert!(
        err.contains("\"use\"") && err.contains("parameters.v") && err.contains("nope"),
        "{err}"
    );
    assert_eq!(run.trace.len(), 1);
    assert_eq!(run.trace[0].error.as_deref(), Some(err.as_str()));

    p.learn(
        "non-bool",
        vec![
            Step::new("a", "set")
                .parameters(json!({"n": 1}))
                .branch("last.n", "a"),
        ],
    )
    .unwrap();
    let run = p.execute("non-bool", json!({}), &no_actions()).unwrap();
    assert_eq!(run.status, RunStatus::Failed);
    let err = run.error.clone().unwrap();
    assert!(
        err.contains("not a bool") && err.contains("next[0].condition") && err.contains("\"a\""),
        "{err}"
    );

    p.learn(
        "eval-error",
        vec![Step::new("a", "set").branch("params.missing == 1", "a")],
    )
    .unwrap();
    let run = p.execute("eval-error", json!({}), &no_actions()).unwrap();
    assert_eq!(run.status, RunStatus::Failed);
    let err = run.error.clone().unwrap();
    assert!(err.contains("failed") && err.contains("missing"), "{err}");
}

#[test]
fn finished_runs_are_recorded_as_procedure_episodes() {
    let (_d, mem) = store();
    let p = mem.procedural();
    p.learn("triage", triage_steps()).unwrap();
    p.learn(
        "doomed",
        vec![Step::new("x", "fail").parameters(json!({"message": "bad input"}))],
    )
    .unwrap();
    let ok = p
        .execute(
            "triage",
            json!({"severity": "high", "count": 1, "service": "api"}),
            &no_actions(),
        )
        .unwrap();
    let bad = p.execute("doomed", json!({}), &no_actions()).unwrap();
    let paused = {
        p.learn("waits", vec![Step::new("w", "external")]).unwrap();
        p.execute("waits", json!({}), &no_actions()).unwrap()
    };
    assert_eq!(paused.status, RunStatus::AwaitingAction);
    assert_eq!(paused.episode_id, None);

    let filters = SearchFilters {
        tags: vec!["procedure".into()],
        ..Default::default()
    };
    let hits = mem.episodic().search("", &filters, 10).unwrap();
    assert_eq!(hits.len(), 2, "only finished runs leave an episode");
    let ok_ep = hits
        .iter()
        .find(|h| h.episode.content["run_id"] == json!(ok.run_id))
        .unwrap();
    assert_eq!(
        ok_ep.episode.summary,
        "procedure \"triage\" completed in 2 steps"
    );
    assert_eq!(ok.episode_id.as_deref(), Some(ok_ep.episode.id.as_str()));
    assert_eq!(ok_ep.episode.content["status"], json!("completed"));
    assert_eq!(ok_ep.episode.content["procedure"], json!("triage"));
    assert_eq!(
        ok_ep.episode.content["outputs"]["page"],
        json!({"msg": "paging on-call for api"})
    );
    assert_eq!(ok_ep.episode.content["error"], Value::Null);
    let bad_ep = hits
        .iter()
        .find(|h| h.episode.content["run_id"] == json!(bad.run_id))
        .unwrap();
    assert_eq!(bad_ep.episode.content["status"], json!("failed"));
    assert_eq!(bad_ep.episode.content["error"], json!("bad input"));
    assert!(
        bad_ep.episode.summary.contains("failed") && bad_ep.episode.summary.contains("bad input")
    );

    // Full-text search finds them by procedure name too.
    let hits = mem.episodic().search("triage", &filters, 10).unwrap();
    assert_eq!(hits.len(), 1);
    // The episode lives in the run's context only.
    let elsewhere = mem.namespace("elsewhere").unwrap();
    assert!(
        elsewhere
            .episodic()
            .search("", &filters, 10)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn steps_from_json_parses_and_names_bad_fields() {
    let steps = steps_from_json(json!([
        {"id": "a", "action": "set", "parameters": {"x": 1}, "next": "b"},
        {"id": "b", "description": "branch", "action": "set",
         "next": [{"condition": "last.x == 1", "next": "a"}]},
        {"id": "c", "action": "set", "next": null}
    ]))
    .unwrap();
    assert_eq!(steps.len(), 3);
    assert_eq!(steps[0].next, Some(Next::Step("b".into())));
    assert_eq!(steps[1].description, "branch");
    assert_eq!(steps[2].parameters, json!({}));
    assert_eq!(steps[2].next, None);
    // What serde gives back parses again to the same steps.
    let round = steps_from_json(serde_json::to_value(&steps).unwrap()).unwrap();
    assert_eq!(round, steps);

    let (field, _) = invalid(steps_from_json(json!({"id": "a"})));
    assert_eq!(field, "steps");
    let (field, _) = invalid(steps_from_json(
        json!([{"id": "a", "action": "set"}, {"id": "b"}]),
    ));
    assert_eq!(field, "steps[1].action");
    let (field, _) = invalid(steps_from_json(json!([{"id": 3, "action": "set"}])));
    assert_eq!(field, "steps[0].id");
    let (field, _) = invalid(steps_from_json(
        json!([{"id": "a", "action": "set", "nxt": "b"}]),
    ));
    assert_eq!(field, "steps[0].nxt");
    let (field, _) = invalid(steps_from_json(json!([
        {"id": "a", "action": "set", "next": [{"condition": true, "next": "a"}]}
    ])));
    assert_eq!(field, "steps[0].next[0].condition");
    let (field, _) = invalid(steps_from_json(
        json!([{"id": "a", "action": "set", "next": 5}]),
    ));
    assert_eq!(field, "steps[0].next");
    let (field, _) = invalid(steps_from_json(json!(["a"])));
    assert_eq!(field, "steps[0]");
}

#[test]
fn runs_are_persisted_while_they_execute() {
    // A host action reads the stored run from inside the run: the steps before
    // it are already on disk, and the run is marked running.
    let (_d, mem) = store();
    let p = mem.procedural();
    p.learn(
        "observe",
        vec![
            Step::new("first", "set")
                .parameters(json!({"v": 1}))
                .then("wait"),
            Step::new("wait", "external").then("peek"),
            Step::new("peek", "peek"),
        ],
    )
    .unwrap();
    let paused = p.execute("observe", json!({}), &no_actions()).unwrap();
    assert_eq!(paused.status, RunStatus::AwaitingAction);
    let run_id = paused.run_id.clone();
    let inner = mem.clone();
    let mut actions = Actions::new();
    actions.insert(
        "peek".into(),
        action(move |_| {
            let run = inner
                .procedural()
                .run(&run_id)
                .map_err(|e| e.to_string())?
                .ok_or("run not persisted")?;
            Ok(json!({"status": run.status, "outputs": run.outputs, "trace": run.trace.len()}))
        }),
    );
    let done = p.resume(&paused.run_id, json!("answer"), &actions).unwrap();
    assert_eq!(done.status, RunStatus::Completed, "{:?}", done.error);
    assert_eq!(
        done.outputs["peek"],
        json!({"status": "running", "outputs": {"first": {"v": 1}, "wait": "answer"}, "trace": 2})
    );
}
