//! Graphs: validation naming the step, learn / update / forget, templates, run episodes, JSON
//! steps, persisted runs.

use super::*;

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
