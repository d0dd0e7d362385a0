//! Approval steps: a paused run survives a reopen and resumes, on either branch; resume errors.

use super::*;

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
