"""Batch writes (record_many, store_many) and the memory budgets from Python."""

import datetime as dt

import pytest

import memstrata

UTC = dt.timezone.utc


def test_record_many_round_trip(mem):
    when = dt.datetime(2025, 3, 4, 5, 6, 7, tzinfo=UTC)
    items = [{"summary": f"chat turn {i} about kayaks", "tags": ["chat"]} for i in range(100)]
    items[7] = {
        "summary": "the special one",
        "content": {"pr": 42},
        "participants": ["alice"],
        "tags": ["chat", "special"],
        "importance": 9,
        "timestamp": when,
    }
    ids = mem.episodic.record_many(items)
    assert len(ids) == 100 and len(set(ids)) == 100
    ep = mem.episodic.get(ids[7])
    assert (ep.summary, ep.content, ep.participants, ep.importance, ep.timestamp) == (
        "the special one",
        {"pr": 42},
        ["alice"],
        9,
        when,
    )
    assert mem.episodic.get(ids[3]).summary == "chat turn 3 about kayaks"
    assert len(mem.episodic.search("", tags=["chat"], limit=200)) == 100
    assert mem.episodic.search("special", limit=5)[0].episode.id == ids[7]
    # Any iterable of mappings; an empty one stores nothing.
    assert len(mem.episodic.record_many(({"summary": f"gen {i}"} for i in range(3)))) == 3
    assert mem.episodic.record_many([]) == []


def test_record_many_rejects_the_batch_naming_item_and_field():
    m = memstrata.Memory()
    try:
        m.episodic.record("kept")
        items = [{"summary": f"poisoned {i}"} for i in range(6)]
        items[3] = {"summary": "bad", "importance": 11}
        with pytest.raises(memstrata.InvalidInputError) as e:
            m.episodic.record_many(items)
        assert e.value.field == "items[3].importance"
        assert "items[3].importance" in str(e.value)
        items[3] = {"summary": "bad", "content": "x" * (17 * 1024 * 1024)}
        with pytest.raises(memstrata.LimitExceededError) as e:
            m.episodic.record_many(items)
        assert e.value.field == "items[3].content"
        items[3] = {"summary": "  "}
        with pytest.raises(memstrata.InvalidInputError) as e:
            m.episodic.record_many(items)
        assert e.value.field == "items[3].summary"
        items[3] = {"content": 1}
        with pytest.raises(memstrata.InvalidInputError) as e:
            m.episodic.record_many(items)
        assert e.value.field == "items[3].summary"
        items[3] = {"summary": "typo", "tag": ["x"]}
        with pytest.raises(memstrata.InvalidInputError) as e:
            m.episodic.record_many(items)
        assert e.value.field == "items[3]" and "tag" in str(e.value)
        items[3] = {"summary": "bad tags", "tags": "one"}
        with pytest.raises(TypeError, match=r"items\[3\]\.tags"):
            m.episodic.record_many(items)
        items[3] = "not a dict"
        with pytest.raises(TypeError, match=r"items\[3\]"):
            m.episodic.record_many(items)
        # Nothing of any rejected batch was stored or indexed.
        assert [e.summary for e in m.episodic.recent()] == ["kept"]
        assert m.episodic.search("poisoned") == []
    finally:
        m.close()


def test_batch_size_limit_has_its_own_error(mem):
    with pytest.raises(memstrata.LimitExceededError) as e:
        mem.episodic.record_many([{"summary": "x"}] * 10_001)
    assert e.value.field == "items"
    assert "items per batch" in str(e.value)
    assert mem.episodic.recent() == []


def test_store_many_round_trip_and_atomic_rejection(mem):
    got = mem.semantic.store_many(
        [
            {"key": "user:ann", "knowledge": {"role": "dev"}},
            {"key": "user:bob", "knowledge": {"city": "Lyon"}, "embedding": [1.0, 0.5]},
            {"key": "user:ann", "knowledge": {"role": "lead"}},
        ]
    )
    assert [(k.key, k.version) for k in got] == [("user:ann", 1), ("user:bob", 1), ("user:ann", 2)]
    assert isinstance(got[0], memstrata.Knowledge)
    assert mem.semantic.retrieve("user:ann") == {"role": "lead"}
    assert mem.semantic.query("Lyon")[0].key == "user:bob"
    with pytest.raises(memstrata.InvalidInputError) as e:
        mem.semantic.store_many([{"key": "a", "knowledge": 1}, {"key": "", "knowledge": 2}])
    assert e.value.field == "items[1].key"
    with pytest.raises(memstrata.InvalidInputError) as e:
        mem.semantic.store_many([{"key": "a", "knowledge": 1}, {"key": "b"}])
    assert e.value.field == "items[1].knowledge"
    with pytest.raises(memstrata.InvalidInputError) as e:
        mem.semantic.store_many([{"key": "c", "knowledge": 1, "embedding": [1.0, 2.0, 3.0]}])
    assert e.value.field == "items[0].embedding"
    assert mem.semantic.keys() == ["user:ann", "user:bob"]


def test_memory_budgets_and_low_memory_preset(tmp_path):
    with memstrata.Memory(tmp_path / "a", low_memory=True) as m:
        m.episodic.record_many([{"summary": "small footprint"}])
        assert len(m.episodic.search("footprint")) == 1
    with memstrata.Memory(tmp_path / "b", episode_cache_bytes=0, short_term_cache_bytes=1 << 20) as m:
        m.short_term.store("k", 1)
        assert m.short_term.retrieve("k") == 1
    with pytest.raises(memstrata.InvalidInputError) as e:
        memstrata.Memory(tmp_path / "c", episode_cache_bytes=2 << 30)
    assert e.value.field == "episode_cache_bytes" and "1 GiB" in str(e.value)
    with pytest.raises(memstrata.InvalidInputError) as e:
        memstrata.Memory(tmp_path / "d", low_memory=True, short_term_cache_bytes=-1)
    assert e.value.field == "short_term_cache_bytes"
    with memstrata.Memory(
        tmp_path / "e", low_memory=True, index_cache_bytes=0, release_memory_interval=0
    ) as m:
        m.episodic.record_many([{"summary": "no heap release"}])
        assert len(m.episodic.search("heap")) == 1
    with memstrata.Memory(
        tmp_path / "f",
        encryption_key=bytes(range(32)),
        index_cache_bytes=1 << 20,
        release_memory_interval=dt.timedelta(milliseconds=500),
    ) as m:
        m.episodic.record_many([{"summary": "encrypted index"}])
        assert len(m.episodic.search("encrypted")) == 1
    with memstrata.Memory(tmp_path / "g", release_memory_interval=2.5) as m:
        m.short_term.store("k", 1)
    with pytest.raises(memstrata.InvalidInputError) as e:
        memstrata.Memory(tmp_path / "h", low_memory=True, index_cache_bytes=2 << 30)
    assert e.value.field == "index_cache_bytes" and "1 GiB" in str(e.value)
    with pytest.raises(memstrata.InvalidInputError) as e:
        memstrata.Memory(tmp_path / "i", index_cache_bytes=-1)
    assert e.value.field == "index_cache_bytes"
    with pytest.raises(memstrata.InvalidInputError) as e:
        memstrata.Memory(tmp_path / "j", release_memory_interval=-1.0)
    assert e.value.field == "release_memory_interval"
    with pytest.raises(TypeError, match="release_memory_interval"):
        memstrata.Memory(tmp_path / "k", release_memory_interval="1s")
