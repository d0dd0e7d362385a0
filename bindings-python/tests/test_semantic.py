import pytest

import memstrata


def test_store_retrieve_get(mem):
    k = mem.semantic.store("user:alice", {"role": "admin"})
    assert isinstance(k, memstrata.Knowledge)
    assert (k.key, k.knowledge, k.version) == ("user:alice", {"role": "admin"}, 1)
    assert k.created_at == k.updated_at
    assert k.created_at.tzinfo is not None
    assert mem.semantic.retrieve("user:alice") == {"role": "admin"}
    got = mem.semantic.get("user:alice")
    assert got.version == 1 and got.knowledge == {"role": "admin"}
    assert "Knowledge(key='user:alice'" in repr(got)


def test_absent(mem):
    assert mem.semantic.retrieve("nobody") is None
    assert mem.semantic.get("nobody") is None


def test_update_is_merge_patch(mem):
    mem.semantic.store("user:alice", {"role": "admin", "tmp": 1, "prefs": {"a": 1, "b": 2}})
    k = mem.semantic.update("user:alice", {"team": "infra", "tmp": None, "prefs": {"b": 3}})
    assert k.knowledge == {"role": "admin", "team": "infra", "prefs": {"a": 1, "b": 3}}
    assert k.version == 2


def test_update_missing_is_not_found(mem):
    with pytest.raises(memstrata.NotFoundError, match="ghost"):
        mem.semantic.update("ghost", {"a": 1})
    assert mem.semantic.get("ghost") is None


def test_store_replaces_and_history(mem):
    mem.semantic.store("k", {"v": 1})
    mem.semantic.store("k", {"v": 2})
    mem.semantic.update("k", {"w": 3})
    hist = mem.semantic.history("k")
    assert [h.version for h in hist] == [1, 2, 3]
    assert [h.knowledge for h in hist] == [{"v": 1}, {"v": 2}, {"v": 2, "w": 3}]
    assert all(isinstance(h, memstrata.KnowledgeVersion) for h in hist)
    assert hist[0].recorded_at.tzinfo is not None
    assert mem.semantic.history("none") == []


def test_history_is_bounded():
    with memstrata.Memory(semantic_history=3) as m:
        for i in range(6):
            m.semantic.store("k", i)
        assert [h.version for h in m.semantic.history("k")] == [4, 5, 6]


def test_query(mem):
    mem.semantic.store("user:alice", {"role": "admin", "team": "infrastructure"})
    mem.semantic.store("user:bob", {"role": "developer", "team": "mobile"})
    hits = mem.semantic.query("infrastructure", limit=5)
    assert [h.key for h in hits] == ["user:alice"]
    assert isinstance(hits[0], memstrata.KnowledgeHit)
    assert hits[0].knowledge["team"] == "infrastructure"
    assert hits[0].score > 0
    assert mem.semantic.query('"mobile (') != []


def test_forget(mem):
    mem.semantic.store("k", 1)
    assert mem.semantic.forget("k") is True
    assert mem.semantic.forget("k") is False
    assert mem.semantic.retrieve("k") is None
    assert mem.semantic.history("k") == []
    assert mem.semantic.query("k") == []


def test_keys(mem):
    for k in ["user:b", "user:a", "team:x"]:
        mem.semantic.store(k, {})
    assert mem.semantic.keys() == ["team:x", "user:a", "user:b"]
    assert mem.semantic.keys("user:") == ["user:a", "user:b"]


def test_query_bad_limit(mem):
    with pytest.raises(memstrata.LimitExceededError) as ei:
        mem.semantic.query("x", limit=100000)
    assert ei.value.field == "limit"
