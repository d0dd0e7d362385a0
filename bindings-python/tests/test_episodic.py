import datetime as dt

import pytest

import memstrata

UTC = dt.timezone.utc


def test_record_get(mem):
    eid = mem.episodic.record(
        "Deployed v2 to staging", content={"pr": 42}, participants=["alice"], tags=["deploy"], importance=7
    )
    ep = mem.episodic.get(eid)
    assert isinstance(ep, memstrata.Episode)
    assert ep.id == eid
    assert ep.summary == "Deployed v2 to staging"
    assert ep.content == {"pr": 42}
    assert ep.participants == ["alice"]
    assert ep.tags == ["deploy"]
    assert ep.importance == 7
    assert ep.timestamp.tzinfo is not None and ep.timestamp.utcoffset() == dt.timedelta(0)
    assert "summary='Deployed v2 to staging'" in repr(ep)


def test_defaults(mem):
    ep = mem.episodic.get(mem.episodic.record("just a summary"))
    assert ep.content is None
    assert ep.participants == [] and ep.tags == []
    assert ep.importance == 5


def test_get_absent(mem):
    assert mem.episodic.get("0190b6a2-0000-7000-8000-000000000000") is None


def test_explicit_timestamp_any_timezone(mem):
    paris = dt.timezone(dt.timedelta(hours=2))
    when = dt.datetime(2024, 5, 1, 14, 30, tzinfo=paris)
    ep = mem.episodic.get(mem.episodic.record("meeting", timestamp=when))
    assert ep.timestamp == when
    assert ep.timestamp.tzinfo == UTC
    assert ep.timestamp.hour == 12


def test_naive_timestamp_is_invalid(mem):
    with pytest.raises(memstrata.InvalidInputError) as ei:
        mem.episodic.record("x", timestamp=dt.datetime(2024, 1, 1))
    assert ei.value.field == "timestamp"
    with pytest.raises(TypeError, match="timestamp"):
        mem.episodic.record("x", timestamp="2024-01-01")


def test_search_finds_next_recorded(mem):
    mem.episodic.record("Deployed v2 to staging", tags=["deploy"], importance=7)
    mem.episodic.record("Lunch with the team")
    hits = mem.episodic.search("staging deploy", limit=10)
    assert len(hits) >= 1
    assert isinstance(hits[0], memstrata.EpisodeHit)
    assert hits[0].episode.summary == "Deployed v2 to staging"
    assert hits[0].score > 0
    assert "EpisodeHit(score=" in repr(hits[0])


def test_search_filters(mem):
    base = dt.datetime(2024, 1, 1, tzinfo=UTC)
    mem.episodic.record("release one", participants=["alice"], tags=["release", "prod"], importance=3, timestamp=base)
    mem.episodic.record(
        "release two", participants=["bob"], tags=["release"], importance=8, timestamp=base + dt.timedelta(days=10)
    )
    mem.episodic.record(
        "release three", participants=["carol", "alice"], tags=["release", "prod"], importance=9,
        timestamp=base + dt.timedelta(days=20),
    )

    def summaries(**kw):
        return sorted(h.episode.summary for h in mem.episodic.search("release", **kw))

    assert summaries() == ["release one", "release three", "release two"]
    assert summaries(tags=["release", "prod"]) == ["release one", "release three"]
    assert summaries(participants=["bob", "carol"]) == ["release three", "release two"]
    assert summaries(min_importance=8) == ["release three", "release two"]
    assert summaries(since=base + dt.timedelta(days=5)) == ["release three", "release two"]
    assert summaries(until=base + dt.timedelta(days=10)) == ["release one", "release two"]
    assert summaries(limit=1, tags=["prod"], min_importance=9) == ["release three"]


def test_search_empty_query_returns_newest(mem):
    mem.episodic.record("first", timestamp=dt.datetime(2024, 1, 1, tzinfo=UTC))
    mem.episodic.record("second", timestamp=dt.datetime(2024, 1, 2, tzinfo=UTC))
    hits = mem.episodic.search("")
    assert [h.episode.summary for h in hits][:2] == ["second", "first"]


@pytest.mark.parametrize("q", ['"unbalanced', "a AND OR (", "title:x", "*?~^", "-", "' OR 1=1 --", "naïve café ✓"])
def test_search_never_fails_on_punctuation(mem, q):
    mem.episodic.record("something")
    assert isinstance(mem.episodic.search(q), list)


def test_search_bad_arguments(mem):
    with pytest.raises(memstrata.InvalidInputError) as ei:
        mem.episodic.search("x", limit=0)
    assert ei.value.field == "limit"
    with pytest.raises(memstrata.InvalidInputError) as ei:
        mem.episodic.search("x", limit=-3)
    assert ei.value.field == "limit"
    with pytest.raises(memstrata.InvalidInputError) as ei:
        mem.episodic.search("x", min_importance=11)
    assert ei.value.field == "min_importance"
    with pytest.raises(memstrata.LimitExceededError) as ei:
        mem.episodic.search("x" * 5000)
    assert ei.value.field == "query"
    with pytest.raises(TypeError, match="tags"):
        mem.episodic.search("x", tags="deploy")


def test_record_bad_arguments(mem):
    with pytest.raises(memstrata.InvalidInputError) as ei:
        mem.episodic.record("x", importance=11)
    assert ei.value.field == "importance"
    with pytest.raises(memstrata.InvalidInputError) as ei:
        mem.episodic.record("x", importance=1000)
    assert ei.value.field == "importance"
    with pytest.raises(memstrata.InvalidInputError) as ei:
        mem.episodic.record("   ")
    assert ei.value.field == "summary"
    with pytest.raises(memstrata.LimitExceededError) as ei:
        mem.episodic.record("x", tags=[f"t{i}" for i in range(65)])
    assert ei.value.field == "tags"
    with pytest.raises(TypeError, match=r"participants\[1\]: expected str, got int"):
        mem.episodic.record("x", participants=["a", 2])
    assert mem.episodic.recent() == []


def test_recent(mem):
    for i in range(3):
        mem.episodic.record(f"e{i}", timestamp=dt.datetime(2024, 1, 1 + i, tzinfo=UTC))
    assert [e.summary for e in mem.episodic.recent()] == ["e2", "e1", "e0"]
    assert [e.summary for e in mem.episodic.recent(limit=1)] == ["e2"]


def test_summarize(mem):
    a = mem.episodic.record("opened ticket", participants=["bob"], timestamp=dt.datetime(2024, 1, 2, tzinfo=UTC))
    b = mem.episodic.record("closed ticket", tags=["done"], timestamp=dt.datetime(2024, 1, 3, tzinfo=UTC))
    text = mem.episodic.summarize([b, a])
    assert text.index("opened ticket") < text.index("closed ticket")
    assert "bob" in text and "#done" in text
    assert mem.episodic.summarize((a, b)) == text


def test_summarize_unknown_id_is_not_found(mem):
    with pytest.raises(memstrata.NotFoundError) as ei:
        mem.episodic.summarize(["0190b6a2-0000-7000-8000-000000000000"])
    assert ei.value.code == "NOT_FOUND"


def test_forget(mem):
    eid = mem.episodic.record("secret plan")
    assert mem.episodic.forget(eid) is True
    assert mem.episodic.forget(eid) is False
    assert mem.episodic.get(eid) is None
    assert mem.episodic.search("secret plan") == []
