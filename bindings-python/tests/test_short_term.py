import datetime as dt

import pytest

import memstrata


def test_store_retrieve_roundtrip(mem):
    entry = mem.short_term.store("draft", {"text": "hello", "n": [1, 2.5, True, None]})
    assert isinstance(entry, memstrata.ShortTermEntry)
    assert entry.key == "draft"
    assert entry.value == {"text": "hello", "n": [1, 2.5, True, None]}
    assert entry.expires_at is None
    assert entry.stored_at.tzinfo is not None
    assert entry.stored_at.utcoffset() == dt.timedelta(0)
    assert mem.short_term.retrieve("draft") == {"text": "hello", "n": [1, 2.5, True, None]}


def test_retrieve_absent_is_none(mem):
    assert mem.short_term.retrieve("nope") is None
    assert mem.short_term.entry("nope") is None


def test_store_replaces(mem):
    mem.short_term.store("k", 1)
    mem.short_term.store("k", "two")
    assert mem.short_term.retrieve("k") == "two"


def test_ttl_seconds_expires_without_sleeping(clocked):
    m, clock = clocked
    e = m.short_term.store("draft", {"a": 1}, ttl=300)
    assert e.expires_at - e.stored_at == dt.timedelta(seconds=300)
    clock.advance(299)
    assert m.short_term.retrieve("draft") == {"a": 1}
    clock.advance(1)
    assert m.short_term.retrieve("draft") is None
    assert m.short_term.keys() == []


def test_ttl_float_and_timedelta(clocked):
    m, clock = clocked
    a = m.short_term.store("a", 1, ttl=1.5)
    b = m.short_term.store("b", 2, ttl=dt.timedelta(minutes=2))
    assert a.expires_at - a.stored_at == dt.timedelta(seconds=1.5)
    assert b.expires_at - b.stored_at == dt.timedelta(minutes=2)
    clock.advance(dt.timedelta(seconds=2))
    assert m.short_term.retrieve("a") is None
    assert m.short_term.retrieve("b") == 2


@pytest.mark.parametrize("ttl", [0, -1, float("nan"), float("inf"), dt.timedelta(0), dt.timedelta(seconds=-5)])
def test_bad_ttl_is_invalid_input(mem, ttl):
    with pytest.raises(memstrata.InvalidInputError) as ei:
        mem.short_term.store("k", 1, ttl=ttl)
    assert ei.value.field == "ttl"
    assert "ttl" in str(ei.value)
    assert mem.short_term.retrieve("k") is None


@pytest.mark.parametrize("ttl", ["10", True, [1]])
def test_ttl_wrong_type_is_type_error(mem, ttl):
    with pytest.raises(TypeError, match="ttl"):
        mem.short_term.store("k", 1, ttl=ttl)


def test_entry_has_timestamps(clocked, clock):
    m, _ = clocked
    m.short_term.store("k", [1], ttl=60)
    e = m.short_term.entry("k")
    assert e.stored_at == dt.datetime(2030, 1, 1, 12, 0, tzinfo=dt.timezone.utc)
    assert e.expires_at == dt.datetime(2030, 1, 1, 12, 1, tzinfo=dt.timezone.utc)
    assert "ShortTermEntry(key='k'" in repr(e)


def test_forget(mem):
    mem.short_term.store("k", 1)
    assert mem.short_term.forget("k") is True
    assert mem.short_term.forget("k") is False
    assert mem.short_term.retrieve("k") is None


def test_forget_expired_is_false(clocked):
    m, clock = clocked
    m.short_term.store("k", 1, ttl=1)
    clock.advance(2)
    assert m.short_term.forget("k") is False


def test_keys_prefix_sorted(mem):
    for k in ["b:2", "a:1", "b:1", "c"]:
        mem.short_term.store(k, k)
    assert mem.short_term.keys() == ["a:1", "b:1", "b:2", "c"]
    assert mem.short_term.keys("b:") == ["b:1", "b:2"]
    assert mem.short_term.keys(prefix="zz") == []


def test_empty_key_is_invalid(mem):
    with pytest.raises(memstrata.InvalidInputError) as ei:
        mem.short_term.store("", 1)
    assert ei.value.field == "key"


def test_key_too_long_is_limit_exceeded(mem):
    with pytest.raises(memstrata.LimitExceededError) as ei:
        mem.short_term.store("k" * 2000, 1)
    assert ei.value.field == "key"
    assert ei.value.code == "LIMIT_EXCEEDED"


def test_non_str_key_is_type_error(mem):
    with pytest.raises(TypeError):
        mem.short_term.store(1, 1)
