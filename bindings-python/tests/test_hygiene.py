"""Duplicates caught on write: `on_duplicate` per call and per context (the core's
hygiene suite covers the detector; these check the binding's arguments and results)."""

import pytest

import memstrata

TEXT = "Deployed version 2.4 of the billing service to staging"


def test_record_policies(mem):
    first = mem.episodic.record_detailed(TEXT, tags=["deploy"], importance=4)
    assert isinstance(first, memstrata.Recorded)
    assert first.created and first.duplicate_of is None and first.on_duplicate == "keep"

    # keep in a context that never asked for another policy: no detection.
    kept = mem.episodic.record_detailed(TEXT)
    assert kept.created and kept.duplicate_of is None
    mem.episodic.forget(kept.id)

    assert mem.episodic.record(TEXT, on_duplicate="skip") == first.id
    merged = mem.episodic.record_detailed(TEXT, tags=["staging"], importance=9, on_duplicate="merge")
    assert not merged.created and merged.id == first.id and merged.on_duplicate == "merge"
    ep = mem.episodic.get(first.id)
    assert ep.tags == ["deploy", "staging"] and ep.importance == 9
    assert ep.seen_count == 2 and ep.last_seen is not None and ep.duplicate_of is None

    linked = mem.episodic.record(TEXT, on_duplicate="link")
    assert mem.episodic.get(linked).duplicate_of == first.id
    assert "duplicate_of=" in repr(mem.episodic.record_detailed(TEXT, on_duplicate="skip"))
    # Once the context has a dedup index, keep names the duplicate too.
    kept = mem.episodic.record_detailed(TEXT)
    assert kept.created and kept.duplicate_of == first.id and kept.similarity == 1.0


def test_batch_items_take_on_duplicate(mem):
    ids = mem.episodic.record_many(
        [
            {"summary": TEXT, "on_duplicate": "skip"},
            {"summary": TEXT + "!", "on_duplicate": "skip"},
            {"summary": "Something else entirely happened today", "on_duplicate": "skip"},
        ]
    )
    assert ids[0] == ids[1] and ids[2] != ids[0]
    assert len(mem.episodic.recent(10)) == 2
    v = {"fact": "The customer prefers invoices by email every month"}
    ks = mem.semantic.store_many(
        [
            {"key": "a", "knowledge": v},
            {"key": "b", "knowledge": v, "on_duplicate": "skip"},
        ]
    )
    assert ks[1].key == "a" and ks[1].duplicate_of == "a"
    assert mem.semantic.get("b") is None
    with pytest.raises(memstrata.InvalidInputError) as e:
        mem.episodic.record_many([{"summary": "x"}, {"summary": "y", "on_duplicate": "drop"}])
    assert e.value.field == "items[1].on_duplicate"


def test_near_duplicate_similarity(mem):
    a = mem.episodic.record("The user prefers dark mode in every editor they use")
    r = mem.episodic.record_detailed(
        "the user really prefers dark-mode in every editor they use!", on_duplicate="skip"
    )
    assert r.id == a and 0.7 <= r.similarity < 1.0


def test_context_default(mem):
    assert mem.on_duplicate() == "keep"
    mem.set_on_duplicate("skip", namespace="work")
    assert mem.on_duplicate("work") == "skip"
    assert mem.on_duplicate() == "keep"
    work = mem.namespace("work")
    a = work.episodic.record(TEXT)
    assert work.episodic.record(TEXT) == a
    assert work.episodic.record_detailed(TEXT, on_duplicate="keep").created


def test_knowledge_policies(mem):
    s = mem.semantic
    v = {"fact": "The customer prefers invoices by email every month"}
    a = s.store("billing.invoices", v)
    assert a.duplicate_of is None
    b = s.store("crm.invoices", v, on_duplicate="skip")
    assert b.key == "billing.invoices" and b.duplicate_of == "billing.invoices"
    assert s.get("crm.invoices") is None
    c = s.store("crm.invoices", v, on_duplicate="link")
    assert c.key == "crm.invoices" and s.get("crm.invoices").duplicate_of == "billing.invoices"


def test_bad_policy_names_the_field(mem):
    with pytest.raises(memstrata.InvalidInputError) as e:
        mem.episodic.record(TEXT, on_duplicate="drop")
    assert e.value.field == "on_duplicate"
    with pytest.raises(memstrata.InvalidInputError) as e:
        mem.semantic.store("k", "v", on_duplicate="Skip")
    assert e.value.field == "on_duplicate"
    with pytest.raises(memstrata.InvalidInputError) as e:
        mem.set_on_duplicate("never")
    assert e.value.field == "on_duplicate"
