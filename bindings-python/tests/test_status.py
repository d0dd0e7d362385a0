import pytest

import memstrata


def test_design_sketch(mem):
    s = mem.status(include_sessions=True, include_metrics=True)
    assert isinstance(s, memstrata.Status)
    assert s.status == "healthy"
    assert s.version == memstrata.__version__
    assert s.uptime_seconds >= 0
    assert s.active_sessions == []
    assert s.session_count == 0
    assert isinstance(s.metrics, dict)
    assert s.issues == []
    assert "Status(status='healthy'" in repr(s)


def test_metrics_are_real(mem):
    for i in range(5):
        mem.short_term.store(f"k{i}", i)
    mem.episodic.record("an episode")
    mem.session_create("s")
    s = mem.status(include_metrics=True)
    m = s.metrics
    assert m["operations"]["short_term.store"]["count"] == 5
    assert {"count", "errors", "p50_us", "p95_us", "p99_us", "max_us"} <= set(m["operations"]["short_term.store"])
    assert m["items"]["short_term"] == 5
    assert m["items"]["episodes"] == 1
    assert m["bytes_on_disk"] > 0
    assert "pending" in m["index"]
    assert s.session_count == 1
    assert [a.name for a in s.active_sessions] == ["s"]


def test_defaults(mem):
    s = mem.status()
    assert s.active_sessions == []
    assert s.session_count == 0
    assert s.metrics is None
    bare = mem.status(include_sessions=False)
    assert bare.active_sessions is None
    assert bare.session_count is None


def test_active_sessions_newest_activity_first_and_bounded(clocked):
    m, clock = clocked
    total = memstrata.ACTIVE_SESSIONS_LIMIT + 3
    created = []
    for i in range(total):
        clock.advance(1)
        created.append(m.session_create(f"s{i}"))
    clock.advance(1)
    m.session_save(created[0].session_id, {"x": 1})  # the oldest becomes the most recently active
    s = m.status()
    assert s.session_count == total
    assert len(s.active_sessions) == memstrata.ACTIVE_SESSIONS_LIMIT
    first = s.active_sessions[0]
    assert isinstance(first, memstrata.ActiveSession)
    assert (first.session_id, first.name, first.created_at) == (
        created[0].session_id,
        "s0",
        created[0].created_at,
    )
    names = [a.name for a in s.active_sessions[1:]]
    assert names == [f"s{i}" for i in range(total - 1, 0, -1)][: memstrata.ACTIVE_SESSIONS_LIMIT - 1]
    assert "ActiveSession(session_id=" in repr(first)


def test_optimize_levels(clocked):
    m, clock = clocked
    for i in range(20):
        m.short_term.store(f"k{i}", "x" * 100, ttl=10)
    clock.advance(11)
    r = m.optimize("light")
    assert isinstance(r, memstrata.OptimizeReport)
    assert r.success is True
    assert isinstance(r.bytes_saved, int)
    assert isinstance(r.optimization_details, dict)
    assert m.short_term.keys() == []
    for level in ("medium", "aggressive"):
        assert m.optimize(level).success is True
    assert m.optimize().success is True


def test_optimize_medium_prunes_sessions_past_retention(tmp_path):
    with memstrata.Memory(tmp_path / "s", session_retention=2) as m:
        s = m.session_create("long")
        for i in range(5):
            m.session_save(s.session_id, {"i": i})
        m.optimize("medium", target_session=s.session_id)
        assert [v.version for v in m.session_versions(s.session_id)] == [4, 5]
        assert m.session_restore(s.session_id).content == {"i": 4}


def test_optimize_errors(mem):
    with pytest.raises(memstrata.InvalidInputError) as ei:
        mem.optimize("extreme")
    assert ei.value.field == "level"
    with pytest.raises(memstrata.NotFoundError):
        mem.optimize("medium", target_session="0190b6a2-0000-7000-8000-000000000000")
