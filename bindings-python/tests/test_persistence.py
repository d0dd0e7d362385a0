"""Close, reopen the same path: everything is there."""

import datetime as dt

import memstrata
import pytest


def test_reopen_keeps_every_layer(store_path):
    with memstrata.Memory(store_path, durability="immediate") as m:
        m.short_term.store("draft", {"text": "hello"})
        m.short_term.store("forever", 1, ttl=10_000)
        m.working.focus("task")
        m.working.add_to_workspace({"note": 1})
        eid = m.episodic.record("Deployed v2 to staging", tags=["deploy"], importance=7)
        m.semantic.store("user:alice", {"role": "admin"})
        m.semantic.update("user:alice", {"team": "infra"})
        m.namespace("proj").short_term.store("k", "proj")

    with memstrata.Memory(store_path) as m:
        assert m.short_term.retrieve("draft") == {"text": "hello"}
        assert m.short_term.retrieve("forever") == 1
        assert m.working.current_focus() == ["task"]
        assert m.working.workspace() == [{"note": 1}]
        assert m.episodic.get(eid).summary == "Deployed v2 to staging"
        assert [h.episode.id for h in m.episodic.search("staging")] == [eid]
        assert m.semantic.retrieve("user:alice") == {"role": "admin", "team": "infra"}
        assert [v.version for v in m.semantic.history("user:alice")] == [1, 2]
        assert m.contexts() == ["default", "proj"]
        assert m.namespace("proj").short_term.retrieve("k") == "proj"


def test_forgotten_items_stay_forgotten_after_reopen(store_path):
    with memstrata.Memory(store_path) as m:
        eid = m.episodic.record("secret plan")
        m.semantic.store("secret", {"plan": 1})
        m.short_term.store("secret", 1)
        m.episodic.forget(eid)
        m.semantic.forget("secret")
        m.short_term.forget("secret")
    with memstrata.Memory(store_path) as m:
        assert m.episodic.get(eid) is None
        assert m.episodic.search("secret plan") == []
        assert m.semantic.retrieve("secret") is None
        assert m.semantic.query("secret plan") == []
        assert m.short_term.retrieve("secret") is None


def test_ttl_persists_across_reopen(store_path):
    clock = memstrata.ManualClock(dt.datetime(2030, 1, 1, tzinfo=dt.timezone.utc))
    with memstrata.Memory(store_path, clock=clock) as m:
        m.short_term.store("k", 1, ttl=60)
    clock.advance(61)
    with memstrata.Memory(store_path, clock=clock) as m:
        assert m.short_term.retrieve("k") is None


def test_manual_durability_data_survives_a_clean_close(store_path):
    with memstrata.Memory(store_path, durability="manual") as m:
        m.semantic.store("k", "v")
    with memstrata.Memory(store_path) as m:
        assert m.semantic.retrieve("k") == "v"


def test_encrypted_store_needs_its_key(store_path):
    key = bytes(range(32))
    with memstrata.Memory(store_path, encryption_key=key, durability="immediate") as m:
        m.short_term.store("secret", {"text": "sealed"})
        m.episodic.record("Sealed episode", tags=["enc"])

    with memstrata.Memory(store_path, encryption_key=key) as m:
        assert m.short_term.retrieve("secret") == {"text": "sealed"}
        assert [h.episode.summary for h in m.episodic.search("sealed")] == ["Sealed episode"]

    for wrong, needle in [(bytes(32), "wrong encryption key"), (None, "is encrypted")]:
        with pytest.raises(memstrata.InvalidInputError) as ei:
            memstrata.Memory(store_path, encryption_key=wrong)
        assert ei.value.field == "encryption_key"
        assert ei.value.code == "INVALID_INPUT"
        assert needle in str(ei.value)

    with pytest.raises(memstrata.InvalidInputError) as ei:
        memstrata.Memory(store_path, encryption_key=b"too short")
    assert ei.value.field == "encryption_key"
    assert "must be exactly 32 bytes, got 9 bytes" in str(ei.value)

    # Still intact after the refusals.
    with memstrata.Memory(store_path, encryption_key=key) as m:
        assert m.short_term.retrieve("secret") == {"text": "sealed"}
