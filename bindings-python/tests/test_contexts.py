import datetime as dt

import pytest

import memstrata


def test_design_sketch(mem):
    stored = mem.context_store("k", 1, ttl=60, namespace="proj")
    assert isinstance(stored, memstrata.ContextStored)
    assert stored.success is True
    assert stored.expires_at is not None and stored.expires_at.tzinfo is not None
    got = mem.context_retrieve("k", namespace="proj")
    assert isinstance(got, memstrata.ContextValue)
    assert (got.success, got.value) == (True, 1)
    assert got.expires_at == stored.expires_at
    assert got.stored_at <= got.expires_at
    # It is the short-term layer of that context.
    assert mem.namespace("proj").short_term.retrieve("k") == 1
    assert mem.short_term.retrieve("k") is None
    assert "ContextValue(success=True, value=1" in repr(got)


def test_default_namespace_is_the_active_context(mem):
    r = mem.context_store("k", {"v": 1})
    assert r.expires_at is None
    assert mem.short_term.retrieve("k") == {"v": 1}
    assert mem.context_retrieve("k").value == {"v": 1}
    mem.switch_context("other")
    assert mem.context_retrieve("k") is None
    mem.context_store("k", "other value")
    assert mem.context_retrieve("k", namespace="default").value == {"v": 1}
    assert mem.context_retrieve("k").value == "other value"


def test_expiry(clocked):
    m, clock = clocked
    m.context_store("k", 1, ttl=dt.timedelta(seconds=30))
    clock.advance(31)
    assert m.context_retrieve("k") is None


def test_errors(mem):
    with pytest.raises(memstrata.InvalidInputError) as ei:
        mem.context_store("k", 1, namespace="bad name")
    assert ei.value.field == "namespace"
    with pytest.raises(memstrata.InvalidInputError) as ei:
        mem.context_retrieve("k", namespace="")
    assert ei.value.field == "namespace"
    with pytest.raises(memstrata.InvalidInputError) as ei:
        mem.context_store("k", 1, ttl=0)
    assert ei.value.field == "ttl"
    with pytest.raises(TypeError, match=r"^value\[0\]: unsupported type object"):
        mem.context_store("k", [object()])
