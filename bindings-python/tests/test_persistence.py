"""Close, reopen the same path: everything is there."""

import datetime as dt

import memstrata


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
