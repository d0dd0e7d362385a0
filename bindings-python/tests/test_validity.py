"""Facts with validity and as-of reads (the core's validity suite covers the
semantics; these check the binding's arguments and results)."""

import datetime as dt

import pytest

import memstrata


def test_supersession_and_as_of(clocked):
    mem, clock = clocked
    t0 = clock.now()
    k1 = mem.semantic.store("ceo", {"name": "Ada"})
    assert k1.valid_from == t0 and k1.valid_until is None
    clock.advance(60)
    k2 = mem.semantic.update("ceo", {"name": "Grace"})
    assert k2.version == 2 and k2.valid_from == t0 + dt.timedelta(seconds=60)

    h = mem.semantic.history("ceo")
    assert [v.knowledge for v in h] == [{"name": "Ada"}, {"name": "Grace"}]
    assert h[0].valid_until == k2.valid_from and h[1].valid_until is None

    half = t0 + dt.timedelta(seconds=30)
    assert mem.semantic.retrieve("ceo", as_of=half) == {"name": "Ada"}
    assert mem.semantic.get("ceo", as_of=half).version == 1
    assert mem.semantic.get("ceo", as_of=t0 - dt.timedelta(seconds=1)) is None
    assert mem.semantic.retrieve("ceo") == {"name": "Grace"}
    hits = mem.semantic.query("Grace", as_of=half)
    assert [(h.key, h.knowledge) for h in hits] == [("ceo", {"name": "Ada"})]
    assert hits[0].valid_from == t0 and hits[0].valid_until == k2.valid_from


def test_valid_until_expires_from_query(clocked):
    mem, clock = clocked
    t0 = clock.now()
    k = mem.semantic.store(
        "promo",
        {"text": "spring discount"},
        valid_from=t0 - dt.timedelta(hours=1),
        valid_until=t0 + dt.timedelta(hours=1),
    )
    assert k.valid_until == t0 + dt.timedelta(hours=1)
    assert len(mem.semantic.query("discount")) == 1
    clock.advance(dt.timedelta(hours=2))
    assert mem.semantic.query("discount") == []
    assert len(mem.semantic.query("discount", include_expired=True)) == 1
    assert mem.semantic.get("promo") is not None

    with pytest.raises(memstrata.InvalidInputError) as e:
        mem.semantic.store("bad", 1, valid_from=t0, valid_until=t0)
    assert e.value.field == "valid_until"
    with pytest.raises(memstrata.InvalidInputError) as e:
        mem.semantic.update("promo", {}, valid_until=t0)
    assert e.value.field == "valid_until"
    with pytest.raises(TypeError):
        mem.semantic.get("promo", as_of="yesterday")

    out = mem.semantic.store_many(
        [{"key": "a", "knowledge": 1, "valid_until": clock.now() + dt.timedelta(minutes=5)}]
    )
    assert out[0].valid_until == clock.now() + dt.timedelta(minutes=5)
    with pytest.raises(memstrata.InvalidInputError) as e:
        mem.semantic.store_many([{"key": "b", "knowledge": 1, "valid_until": t0}])
    assert e.value.field == "items[0].valid_until"


def test_episodes_as_of(clocked):
    mem, clock = clocked
    t0 = clock.now()
    a = mem.episodic.record("billing deploy")
    clock.advance(60)
    b = mem.episodic.record("billing outage", timestamp=t0 - dt.timedelta(days=1))
    ep = mem.episodic.get(b)
    assert ep.recorded_at == t0 + dt.timedelta(seconds=60)
    assert ep.timestamp == t0 - dt.timedelta(days=1)
    half = t0 + dt.timedelta(seconds=30)
    assert [h.episode.id for h in mem.episodic.search("billing", as_of=half)] == [a]
    assert len(mem.episodic.search("billing")) == 2
    assert [e.id for e in mem.episodic.recent(as_of=half)] == [a]
    assert len(mem.episodic.recent(10)) == 2
