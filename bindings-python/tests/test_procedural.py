import threading

import pytest

import memstrata

TRIAGE = [
    {"id": "look", "description": "fetch ticket", "action": "lookup", "parameters": {"id": 7},
     "next": [{"condition": "last.severity > 3", "next": "page"}, {"condition": "true", "next": "note"}]},
    {"id": "page", "description": "page on-call", "action": "page", "parameters": {}},
    {"id": "note", "description": "remember it", "action": "episodic.record",
     "parameters": {"summary": "low-severity ticket"}},
]


def test_design_sketch_pause_and_resume(mem):
    p = mem.procedural.learn("triage", TRIAGE)
    assert isinstance(p, memstrata.Procedure)
    assert (p.name, p.version) == ("triage", 1)
    assert [s["id"] for s in p.steps] == ["look", "page", "note"]
    run = mem.procedural.execute("triage", {"user": "bob"}, actions={"lookup": lambda params: {"severity": 5}})
    assert isinstance(run, memstrata.Run)
    assert run.status == "awaiting_action"
    assert run.pending.action == "page"
    assert run.pending.step == "page"
    assert run.pending.description == "page on-call"
    assert run.pending.parameters == {}
    assert run.outputs == {"look": {"severity": 5}}
    assert run.params == {"user": "bob"}
    assert run.finished_at is None
    assert "pending=<'page' 'page'>" in repr(run)
    run = mem.procedural.resume(run.run_id, {"paged": True})
    assert run.status == "completed"
    assert run.pending is None
    assert run.outputs["page"] == {"paged": True}
    assert [t.step for t in run.trace] == ["look", "page"]
    assert all(isinstance(t, memstrata.TraceEntry) for t in run.trace)
    assert run.trace[0].parameters == {"id": 7}
    assert run.trace[0].at.tzinfo is not None
    assert run.finished_at is not None and run.started_at <= run.finished_at
    assert run.episode_id is not None
    assert "triage" in mem.episodic.get(run.episode_id).summary


def test_low_severity_branch_runs_builtin(mem):
    mem.procedural.learn("triage", TRIAGE)
    run = mem.procedural.execute("triage", actions={"lookup": lambda p: {"severity": 1}})
    assert run.status == "completed"
    assert [t.step for t in run.trace] == ["look", "note"]
    eid = run.outputs["note"]["id"]
    assert mem.episodic.get(eid).summary == "low-severity ticket"


def test_host_action_receives_resolved_parameters(mem):
    seen = []

    def fetch(params):
        seen.append(params)
        return {"status": 200, "items": [1, 2, 3]}

    mem.procedural.learn("t", [
        {"id": "a", "action": "fetch", "parameters": {"url": "https://x/{{ params.path }}", "n": "{{ params.n + 1 }}"},
         "next": "b"},
        {"id": "b", "action": "set", "parameters": {"count": "{{ size(steps.a.output.items) }}"}},
    ])
    run = mem.procedural.execute("t", {"path": "api", "n": 1}, actions={"fetch": fetch})
    assert seen == [{"url": "https://x/api", "n": 2}]
    assert run.status == "completed"
    assert run.outputs["b"] == {"count": 3}


def test_exception_in_host_action_fails_the_step(mem):
    def boom(params):
        raise ValueError("ticket service unavailable")

    mem.procedural.learn("triage", TRIAGE)
    run = mem.procedural.execute("triage", actions={"lookup": boom})
    assert run.status == "failed"
    assert "ValueError: ticket service unavailable" in run.error
    assert run.trace[-1].error is not None and "ticket service unavailable" in run.trace[-1].error
    assert run.trace[-1].output is None
    # The engine is not poisoned: everything keeps working, including the same procedure.
    mem.short_term.store("k", 1)
    assert mem.short_term.retrieve("k") == 1
    ok = mem.procedural.execute("triage", actions={"lookup": lambda p: {"severity": 1}})
    assert ok.status == "completed"


def test_unconvertible_host_output_fails_the_step(mem):
    mem.procedural.learn("t", [{"id": "a", "action": "bad"}])
    run = mem.procedural.execute("t", actions={"bad": lambda p: {"x": {1, 2}}})
    assert run.status == "failed"
    assert "output.x: unsupported type set" in run.error


def test_keyboard_interrupt_in_host_action_is_reraised(mem):
    def interrupt(params):
        raise KeyboardInterrupt

    mem.procedural.learn("t", [{"id": "a", "action": "stop"}])
    with pytest.raises(KeyboardInterrupt):
        mem.procedural.execute("t", actions={"stop": interrupt})
    assert mem.procedural.list() == ["t"]


def test_host_action_may_call_back_into_memory(mem):
    def remember(params):
        mem.short_term.store("from-action", params["v"])
        return {"stored": mem.short_term.retrieve("from-action")}

    mem.procedural.learn("t", [{"id": "a", "action": "remember", "parameters": {"v": "{{ params.v }}"}}])
    run = mem.procedural.execute("t", {"v": [1, 2]}, actions={"remember": remember})
    assert run.status == "completed", run.error
    assert run.outputs["a"] == {"stored": [1, 2]}
    assert mem.short_term.retrieve("from-action") == [1, 2]


def test_host_actions_from_many_threads(mem):
    mem.procedural.learn("t", [{"id": "a", "action": "double", "parameters": {"n": "{{ params.n }}"}}])
    results = {}
    errors = []

    def worker(n):
        try:
            run = mem.procedural.execute("t", {"n": n}, actions={"double": lambda p: p["n"] * 2})
            results[n] = run.outputs["a"]
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert results == {n: n * 2 for n in range(16)}


def test_registered_action(mem):
    assert mem.procedural.registered_actions() == []
    mem.procedural.register_action("lookup", lambda p: {"severity": 9})
    assert mem.procedural.registered_actions() == ["lookup"]
    mem.procedural.learn("triage", TRIAGE)
    run = mem.procedural.execute("triage")
    assert run.status == "awaiting_action" and run.pending.action == "page"
    # A per-call action takes precedence.
    run = mem.procedural.execute("triage", actions={"lookup": lambda p: {"severity": 0}})
    assert run.status == "completed"
    # Registered actions are engine-wide: other handles see them.
    assert mem.namespace("other").procedural.registered_actions() == ["lookup"]
    assert mem.procedural.unregister_action("lookup") is True
    assert mem.procedural.unregister_action("lookup") is False


def test_builtin_names_are_reserved(mem):
    with pytest.raises(memstrata.InvalidInputError) as ei:
        mem.procedural.register_action("set", lambda p: p)
    assert ei.value.field == "name"
    mem.procedural.learn("t", [{"id": "a", "action": "set"}])
    with pytest.raises(memstrata.InvalidInputError) as ei:
        mem.procedural.execute("t", actions={"set": lambda p: p})
    assert ei.value.field == "actions"


def test_actions_must_be_callables(mem):
    mem.procedural.learn("t", [{"id": "a", "action": "x"}])
    with pytest.raises(TypeError, match=r"actions\['x'\]: expected a callable, got int"):
        mem.procedural.execute("t", actions={"x": 1})
    with pytest.raises(TypeError, match="actions"):
        mem.procedural.execute("t", actions=[("x", print)])
    with pytest.raises(TypeError, match="action"):
        mem.procedural.register_action("x", "not callable")


def test_learn_validation_names_the_step(mem):
    with pytest.raises(memstrata.InvalidInputError) as ei:
        mem.procedural.learn("t", [{"id": "a", "action": "set", "next": "nowhere"}])
    assert ei.value.field == "steps[0].next"
    with pytest.raises(memstrata.InvalidInputError) as ei:
        mem.procedural.learn("t", [{"id": "a", "action": "set"}, {"id": "a", "action": "set"}])
    assert ei.value.field == "steps[1].id"
    with pytest.raises(memstrata.InvalidInputError) as ei:
        mem.procedural.learn("t", [{"id": "a", "action": "set", "next": [{"condition": "1 +", "next": "a"}]}])
    assert ei.value.field == "steps[0].next[0].condition"
    with pytest.raises(memstrata.InvalidInputError) as ei:
        mem.procedural.learn("t", [{"id": "a", "action": "set", "nxt": "a"}])
    assert ei.value.field.startswith("steps[0]")
    with pytest.raises(memstrata.InvalidInputError) as ei:
        mem.procedural.learn("t", {"id": "a"})
    assert ei.value.field == "steps"
    with pytest.raises(TypeError, match=r"^steps\[0\]\.parameters: unsupported type set"):
        mem.procedural.learn("t", [{"id": "a", "action": "set", "parameters": set()}])
    assert mem.procedural.list() == []


def test_learn_twice_is_conflict_update_bumps_version(mem):
    mem.procedural.learn("t", [{"id": "a", "action": "set"}])
    with pytest.raises(memstrata.ConflictError):
        mem.procedural.learn("t", [{"id": "a", "action": "set"}])
    p = mem.procedural.update("t", [{"id": "b", "action": "set", "parameters": {"v": 1}}])
    assert p.version == 2
    assert p.steps[0]["id"] == "b"
    got = mem.procedural.get("t")
    assert got.version == 2 and got.updated_at >= got.created_at
    assert "Procedure(name='t', steps=<1 steps>, version=2" in repr(got)
    with pytest.raises(memstrata.NotFoundError):
        mem.procedural.update("missing", [{"id": "a", "action": "set"}])


def test_get_list_forget(mem):
    assert mem.procedural.get("nope") is None
    mem.procedural.learn("b", [{"id": "a", "action": "set"}])
    mem.procedural.learn("a", [{"id": "a", "action": "set"}])
    assert mem.procedural.list() == ["a", "b"]
    assert mem.procedural.forget("a") is True
    assert mem.procedural.forget("a") is False
    assert mem.procedural.list() == ["b"]


def test_execute_errors(mem):
    with pytest.raises(memstrata.NotFoundError):
        mem.procedural.execute("missing")
    mem.procedural.learn("t", [{"id": "a", "action": "set"}])
    with pytest.raises(memstrata.InvalidInputError) as ei:
        mem.procedural.execute("t", [1, 2])
    assert ei.value.field == "params"


def test_resume_errors(mem):
    with pytest.raises(memstrata.NotFoundError):
        mem.procedural.resume("0190b6a2-0000-7000-8000-000000000000", {})
    mem.procedural.learn("t", [{"id": "a", "action": "set"}])
    done = mem.procedural.execute("t")
    assert done.status == "completed"
    with pytest.raises(memstrata.ConflictError):
        mem.procedural.resume(done.run_id, {})


def test_fail_builtin_and_step_limit():
    with memstrata.Memory(max_steps=5) as m:
        m.procedural.learn("f", [{"id": "a", "action": "fail", "parameters": {"message": "nope"}}])
        run = m.procedural.execute("f")
        assert (run.status, run.error) == ("failed", "nope")
        m.procedural.learn("loop", [{"id": "a", "action": "set", "next": "a"}])
        run = m.procedural.execute("loop")
        assert run.status == "failed"
        assert "step limit" in run.error
        assert run.steps_executed == 5


def test_run_lookup_and_paused_run_survives_reopen(store_path):
    with memstrata.Memory(store_path) as m:
        m.procedural.learn("triage", TRIAGE)
        run = m.procedural.execute("triage", actions={"lookup": lambda p: {"severity": 7}})
        assert m.procedural.run(run.run_id).status == "awaiting_action"
        assert m.procedural.run("0190b6a2-0000-7000-8000-000000000000") is None
    with memstrata.Memory(store_path) as m:
        again = m.procedural.run(run.run_id)
        assert again.status == "awaiting_action" and again.pending.action == "page"
        done = m.procedural.resume(run.run_id, {"paged": True})
        assert done.status == "completed"
        assert done.outputs["look"] == {"severity": 7}


def test_procedures_live_in_a_context(mem):
    proj = mem.namespace("proj")
    proj.procedural.learn("t", [{"id": "a", "action": "set"}])
    assert proj.procedural.list() == ["t"]
    assert mem.procedural.list() == []
    run = proj.procedural.execute("t")
    assert run.context == "proj"
    # Runs are global: any handle can look them up.
    assert mem.procedural.run(run.run_id).run_id == run.run_id
