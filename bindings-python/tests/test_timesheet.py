import datetime as dt
import os
import time

import pytest

import memstrata

UTC = dt.timezone.utc


def test_design_sketch(clocked):
    m, clock = clocked
    t = m.punch_in("claude", "write tests")
    assert isinstance(t, memstrata.PunchIn)
    assert t.success is True and t.task_id
    assert t.start_time == dt.datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
    clock.advance(90)
    out = m.punch_out(t.task_id, "done", detect_files=False)
    assert isinstance(out, memstrata.PunchOut)
    assert out.success is True
    assert out.duration_seconds == 90.0
    assert (out.files_modified, out.files) == (0, [])
    task = m.task(t.task_id)
    assert isinstance(task, memstrata.Task)
    assert (task.llm_name, task.task_description, task.status, task.summary) == ("claude", "write tests", "closed", "done")
    assert task.namespace == "default"
    assert task.context is None
    assert task.end_time == dt.datetime(2030, 1, 1, 12, 1, 30, tzinfo=UTC)
    assert task.duration_seconds == 90.0
    # A finished task is recorded as an episode tagged "task".
    ep = m.episodic.get(task.episode_id)
    assert "task" in ep.tags


def test_errors(mem):
    with pytest.raises(memstrata.NotFoundError):
        mem.punch_out("0190b6a2-0000-7000-8000-000000000000", "x")
    t = mem.punch_in("claude", "once")
    mem.punch_out(t.task_id, "first")
    with pytest.raises(memstrata.ConflictError):
        mem.punch_out(t.task_id, "second")
    with pytest.raises(memstrata.InvalidInputError) as ei:
        mem.punch_in("", "x")
    assert ei.value.field == "llm_name"
    with pytest.raises(memstrata.InvalidInputError) as ei:
        mem.punch_in("claude", "x", namespace="bad context")
    assert ei.value.field == "namespace"
    with pytest.raises(memstrata.LimitExceededError):
        mem.punch_in("claude", "x", context="x" * ((16 << 20) + 1))
    assert mem.task("0190b6a2-0000-7000-8000-000000000000") is None


def test_context_is_free_text_and_namespace_the_memstrata_context(mem):
    text = "Additional context: the parser fails on nested lists (see #42).\nNot a context name!"
    t = mem.punch_in("claude", "fix the parser", context=text, namespace="proj")
    task = mem.task(t.task_id)
    assert (task.context, task.namespace) == (text, "proj")
    # Positional too, and no namespace: the active context.
    u = mem.punch_in("gpt", "review", "any text at all")
    assert (mem.task(u.task_id).context, mem.task(u.task_id).namespace) == ("any text at all", "default")
    assert [x.context for x in mem.tasks(namespace="proj")] == [text]
    mem.punch_out(t.task_id, "fixed")
    ep = mem.namespace("proj").episodic.get(mem.task(t.task_id).episode_id)
    assert ep.content["context"] == text


def test_tasks_filters_and_report(clocked):
    m, clock = clocked
    a = m.punch_in("claude", "a")
    clock.advance(10)
    b = m.punch_in("gpt", "b", namespace="proj")
    clock.advance(10)
    m.punch_out(a.task_id, "a done")
    clock.advance(10)
    c = m.punch_in("claude", "c")

    def ids(**kw):
        return {t.task_id for t in m.tasks(**kw)}

    assert ids() == {a.task_id, b.task_id, c.task_id}
    assert ids(llm_name="claude") == {a.task_id, c.task_id}
    assert ids(namespace="proj") == {b.task_id}
    assert ids(status="open") == {b.task_id, c.task_id}
    assert ids(status="closed") == {a.task_id}
    assert ids(since=dt.datetime(2030, 1, 1, 12, 0, 5, tzinfo=UTC)) == {b.task_id, c.task_id}
    assert ids(until=dt.datetime(2030, 1, 1, 12, 0, 5, tzinfo=UTC)) == {a.task_id}
    assert len(m.tasks(limit=1)) == 1
    with pytest.raises(memstrata.InvalidInputError) as ei:
        m.tasks(status="finished")
    assert ei.value.field == "status"

    report = m.timesheet_report()
    assert isinstance(report, memstrata.TimesheetReport)
    assert report.tasks == 3
    assert report.total_seconds == 20.0
    by_name = {l.llm_name: l for l in report.llms}
    assert isinstance(by_name["claude"], memstrata.LlmTimesheet)
    assert (by_name["claude"].tasks, by_name["claude"].open_tasks, by_name["claude"].total_seconds) == (2, 1, 20.0)
    assert (by_name["gpt"].tasks, by_name["gpt"].open_tasks) == (1, 1)
    assert report.generated_at.tzinfo is not None
    bounded = m.timesheet_report(since=dt.datetime(2030, 1, 1, 12, 0, 5, tzinfo=UTC))
    assert bounded.tasks == 2
    assert bounded.since == dt.datetime(2030, 1, 1, 12, 0, 5, tzinfo=UTC)


def test_detect_files_under_workspace_roots(tmp_path):
    root = tmp_path / "repo"
    root.mkdir()
    (root / "old.txt").write_text("old")
    old = time.time() - 3600
    os.utime(root / "old.txt", (old, old))
    (root / ".gitignore").write_text("ignored.log\n")
    os.utime(root / ".gitignore", (old, old))
    with memstrata.Memory(tmp_path / "store", workspace_roots=[root]) as m:
        t = m.punch_in("claude", "edit files")
        time.sleep(0.05)  # file mtimes must be after punch-in; not a timing assertion
        (root / "new.py").write_text("print(1)")
        (root / "ignored.log").write_text("noise")
        out = m.punch_out(t.task_id, "edited", detect_files=True)
        assert out.files_modified == 1
        assert [os.path.basename(f) for f in out.files] == ["new.py"]
        assert m.task(t.task_id).files == out.files
