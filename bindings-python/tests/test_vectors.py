"""Host-supplied embeddings, hybrid search and the embedder hook (synthetic vectors)."""

import math

import pytest

import memstrata


def letters(text):
    """A deterministic toy embedding: letter counts a..p (texts sharing letters are close)."""
    v = [0.01] * 16
    for c in text:
        if "a" <= c <= "z":
            v[(ord(c) - ord("a")) % 16] += 1.0
    return v


def test_dimension_mismatch_is_invalid_input_naming_both(mem):
    mem.episodic.record("first", embedding=[1.0, 0.0, 0.0])
    with pytest.raises(memstrata.InvalidInputError) as ei:
        mem.episodic.record("second", embedding=[1.0, 0.0, 0.0, 0.0])
    assert ei.value.code == "INVALID_INPUT"
    assert ei.value.field == "embedding"
    assert "embedding has 4 dimensions, context 'default' uses 3" in str(ei.value)
    with pytest.raises(memstrata.InvalidInputError) as ei:
        mem.semantic.store("k", "v", embedding=[1.0, 2.0])
    assert ei.value.field == "embedding"
    with pytest.raises(memstrata.InvalidInputError):
        mem.episodic.search("first", embedding=[1.0])
    # Another context fixes its own dimension.
    mem.namespace("other").episodic.record("x", embedding=[0.5] * 8)
    assert len(mem.episodic.recent()) == 1


@pytest.mark.parametrize("bad", [[1.0, math.nan], [math.inf, 1.0], [], [0.0, 0.0], [1e300]])
def test_bad_vectors_are_refused(mem, bad):
    with pytest.raises(memstrata.InvalidInputError) as ei:
        mem.episodic.record("x", embedding=bad)
    assert ei.value.field == "embedding"
    assert mem.episodic.recent() == []


def test_non_numeric_embedding_is_a_type_error(mem):
    with pytest.raises(TypeError, match="embedding"):
        mem.episodic.record("x", embedding="1,2,3")
    with pytest.raises(TypeError, match=r"embedding\[1\]"):
        mem.episodic.record("x", embedding=[1.0, "a"])


def test_hybrid_hits_report_ranks_and_fusion(mem):
    ep = mem.episodic
    a = ep.record("apple apple apple orchard", embedding=[0.0, 1.0, 0.0])
    b = ep.record("banana bread", embedding=[1.0, 0.0, 0.0])
    c = ep.record("apple pie with a long list of other words around it", embedding=[0.6, 0.8, 0.0])

    bm25 = ep.search("apple")
    assert [h.episode.id for h in bm25] == [a, c]
    assert [(h.bm25_rank, h.vector_rank) for h in bm25] == [(1, None), (2, None)]

    # RRF, k = 60, weights 1/1: A = 1/61 + 1/63 > C = 2/62 > B = 1/61.
    hits = ep.search("apple", embedding=[1.0, 0.0, 0.0], fusion="rrf", bm25_weight=1, vector_weight=1, rrf_k=60)
    assert [h.episode.id for h in hits] == [a, c, b]
    ranks = {h.episode.id: (h.bm25_rank, h.vector_rank) for h in hits}
    assert ranks == {a: (1, 3), b: (None, 1), c: (2, 2)}
    assert hits[0].score == pytest.approx(1 / 61 + 1 / 63, rel=1e-5)

    # Linear: weights 0.3 BM25 / 0.7 vector; B = 0.7 wins, A = 0.3 is last.
    hits = ep.search("apple", embedding=[1.0, 0.0, 0.0], fusion="linear", bm25_weight=0.3, vector_weight=0.7)
    assert hits[0].episode.id == b
    assert hits[0].score == pytest.approx(0.7, abs=0.01)
    assert hits[-1].episode.id == a
    assert hits[-1].score == pytest.approx(0.3, abs=0.01)

    # Pure vector search: empty query, score = cosine.
    hits = ep.search("", embedding=[1.0, 0.0, 0.0])
    assert [h.episode.id for h in hits] == [b, c, a]
    assert [h.vector_rank for h in hits] == [1, 2, 3]
    assert all(h.bm25_rank is None for h in hits)
    assert hits[1].score == pytest.approx(0.6, abs=0.01)

    with pytest.raises(memstrata.InvalidInputError) as ei:
        ep.search("apple", embedding=[1.0, 0.0, 0.0], fusion="max")
    assert ei.value.field == "fusion"
    with pytest.raises(memstrata.InvalidInputError) as ei:
        ep.search("apple", embedding=[1.0, 0.0, 0.0], rrf_k=0)
    assert ei.value.field == "rrf_k"


def test_filters_apply_before_fusion(mem):
    ep = mem.episodic
    for i in range(100):
        ep.record(f"walrus walrus {i}", tags=["drop"], embedding=[1.0, 0.001 * i, 0.0])
    kept = {ep.record(f"walrus note {i} and more", tags=["keep"], embedding=[0.1, 1.0, 0.01 * i]) for i in range(12)}
    hits = ep.search("walrus", tags=["keep"], limit=10, embedding=[1.0, 0.0, 0.0])
    assert len(hits) == 10
    assert {h.episode.id for h in hits} <= kept


def test_semantic_store_and_query_with_embeddings(mem):
    mem.semantic.store("fruit", {"text": "apples and pears"}, embedding=[1.0, 0.0])
    mem.semantic.store("tools", {"text": "hammers"}, embedding=[0.0, 1.0])
    hits = mem.semantic.query("", embedding=[0.9, 0.1])
    assert [h.key for h in hits] == ["fruit", "tools"]
    assert [h.vector_rank for h in hits] == [1, 2]
    hits = mem.semantic.query("hammers", embedding=[0.9, 0.1], fusion="rrf")
    assert {h.key: (h.bm25_rank, h.vector_rank) for h in hits} == {"fruit": (None, 1), "tools": (1, 2)}


def test_embedder_hook_on_record_store_and_search(mem):
    seen = []

    def embed(texts):
        seen.append(list(texts))
        return [letters(t) for t in texts]

    mem.set_embedder(embed)
    eid = mem.episodic.record("abc abc", content={"note": "cab"})
    mem.episodic.record("xyz mno")
    mem.semantic.store("fact", "abba")
    assert seen == [["abc abc\nnote cab"], ["xyz mno"], ["fact\nabba"]]
    hits = mem.episodic.search("bca")
    assert seen[-1] == ["bca"]
    assert hits[0].episode.id == eid
    assert (hits[0].bm25_rank, hits[0].vector_rank) == (None, 1)
    assert mem.semantic.query("abab")[0].key == "fact"
    # An empty query does not call it; an explicit embedding is used as given.
    n = len(seen)
    mem.episodic.search("")
    mem.episodic.search("bca", embedding=letters("xyz"))
    assert len(seen) == n
    # The hook is per store: a namespace handle uses it too.
    mem.namespace("other").episodic.record("hello")
    assert seen[-1] == ["hello"]
    mem.set_embedder(None)
    assert mem.episodic.search("bca") == []


def test_embedder_that_raises_is_a_clear_error(mem):
    def broken(texts):
        raise RuntimeError("model server down")

    mem.set_embedder(broken)
    with pytest.raises(memstrata.InvalidInputError) as ei:
        mem.episodic.record("x")
    assert ei.value.field == "embedder"
    assert "RuntimeError: model server down" in str(ei.value)
    with pytest.raises(memstrata.InvalidInputError) as ei:
        mem.episodic.search("x")
    assert ei.value.field == "embedder"
    assert mem.episodic.recent() == []

    mem.set_embedder(lambda texts: "not vectors")
    with pytest.raises(memstrata.InvalidInputError) as ei:
        mem.semantic.store("k", 1)
    assert ei.value.field == "embedder"
    mem.set_embedder(lambda texts: [[math.nan]])
    with pytest.raises(memstrata.InvalidInputError):
        mem.semantic.store("k", 1)
    assert mem.semantic.get("k") is None
    with pytest.raises(TypeError):
        mem.set_embedder(42)
