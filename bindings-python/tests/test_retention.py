"""Forgetting by utility: `set_retention` / `retention` / `evictions`, the report in
`status()` and `optimize()`, and `rank_by_utility` (the core's retention suite covers
eviction itself; these check the binding's arguments and results)."""

import datetime

import pytest

import memstrata


def test_policy_evicts_lowest_utility_and_audits(mem):
    ids = [mem.episodic.record(f"observation {i}", importance=i) for i in range(1, 7)]
    mem.set_retention(max_episodes=4, max_age=datetime.timedelta(days=30), namespace="default")
    policy = mem.retention()
    assert isinstance(policy, memstrata.Retention)
    assert policy.max_episodes == 4 and policy.max_bytes is None
    assert policy.max_age == 30 * 86400.0
    assert mem.episodic.get(ids[0]) is None and mem.episodic.get(ids[1]) is None
    assert mem.episodic.get(ids[5]) is not None

    evictions = mem.evictions()
    assert len(evictions) == 2
    assert all(isinstance(e, memstrata.Eviction) for e in evictions)
    assert {e.id for e in evictions} == set(ids[:2])
    assert all(e.reason == "max_episodes" and e.context == "default" for e in evictions)
    assert evictions[0].evicted_at.tzinfo is not None and 0.0 <= evictions[0].utility <= 1.0
    assert "reason='max_episodes'" in repr(evictions[0])

    status = mem.status()
    [r] = status.retention
    assert isinstance(r, memstrata.RetentionStatus)
    assert (r.context, r.max_episodes, r.evicted) == ("default", 4, 2)

    report = mem.optimize("light")
    assert report.optimization_details["retention"]["contexts"]["default"]["evicted_total"] == 2

    mem.set_retention()  # no limit: cleared
    assert mem.retention().max_episodes is None
    assert mem.status().retention[0].max_episodes is None


def test_bad_limits_name_the_field(mem):
    with pytest.raises(memstrata.InvalidInputError, match="max_episodes"):
        mem.set_retention(max_episodes=0)
    with pytest.raises(memstrata.InvalidInputError, match="max_bytes"):
        mem.set_retention(max_bytes=-5)
    with pytest.raises(memstrata.InvalidInputError, match="max_age"):
        mem.set_retention(max_age=-1)
    with pytest.raises(TypeError):
        mem.set_retention(4)  # keyword-only
    assert mem.retention().max_episodes is None


def test_rank_by_utility(mem):
    old = mem.episodic.record(
        "release checklist", importance=1, timestamp=datetime.datetime(2001, 1, 1, tzinfo=datetime.timezone.utc)
    )
    new = mem.episodic.record("release checklist", importance=9)
    hits = mem.episodic.search("release checklist", rank_by_utility=True)
    assert [h.episode.id for h in hits] == [new, old]
    assert hits[0].score > hits[1].score
    plain = mem.episodic.search("release checklist")
    assert plain[0].score == plain[1].score
