"""Retrieval-quality harness: recall@1/5/10 and MRR on the convmem set.

Every dialogue turn is recorded as an episode through the memstrata Python
binding (one namespace per persona; summary = the turn's text, participants =
[speaker], timestamp = the turn's time); every question is searched as typed
in its persona's namespace. Methods:

- BM25: the engine's `episodic.search(question)`.
- vector: cosine between the question's and every turn's embedding
  (all-MiniLM-L6-v2, int8 ONNX; benches/retrieval/embed.py).
- hybrid linear: bm25_weight * bm25 / max_bm25_in_list + vector_weight * max(cosine, 0).
- hybrid RRF: bm25_weight / (k + rank_bm25) + vector_weight / (k + rank_vec).
- hybrid adaptive (the engine's default): each list normalised to (score - min) / σ,
  the BM25 weight scaled by min(1, 1 - mean(top 50 bm25, missing slots 0) / top bm25).
  Both lists at depth max(limit * 5, 50) = 50; a hit missing from a list adds 0.
- SQLite FTS5 (unicode61, and porter) as a lexical reference: the question's
  words OR-ed, ranked by bm25().

When the binding has the hybrid-retrieval API (`embedding=` on record and
search), vector-only and the fusions are run by the engine; otherwise they are
computed here with exactly the formulas above from the engine's BM25 list and
numpy cosine, and labelled "harness-side".

Metrics: recall@k = share of a question's gold turns in the top k, averaged
over questions; MRR = mean of 1 / rank of the first gold turn in the top 10
(0 when none). Usage:

    python run.py --out target/bench/retrieval.md [--json FILE] [--cache DIR] [--bm25-only]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import generate  # noqa: E402

import memstrata  # noqa: E402

DEPTH = 50  # max(limit * 5, 50) with limit = 10
KS = (1, 5, 10)
VECTOR_WEIGHTS = (0.2, 0.5, 0.8)
RRF_K = 60.0

Ranked = list[str]  # turn ids, best first


def engine_has_vectors(mem: Any) -> bool:
    """True when `episodic.search` takes `embedding=` (the hybrid-retrieval API)."""
    try:
        mem.episodic.search("", embedding=[1.0, 0.0], limit=1)
    except TypeError:
        return False
    except Exception:  # noqa: BLE001 - e.g. a dimension error: the argument exists
        return True
    return True


class Harness:
    def __init__(self, data: dict[str, Any], embedder: Any, use_engine_vectors: Optional[bool]):
        self.data = data
        self.embedder = embedder
        self.tmp = tempfile.TemporaryDirectory(prefix="memstrata-retrieval-")
        self.mem = memstrata.Memory(Path(self.tmp.name) / "convmem.mem", durability="periodic")
        self.engine_vectors = (
            engine_has_vectors(self.mem.namespace("probe")) if use_engine_vectors is None else use_engine_vectors
        )
        self.ns: dict[str, Any] = {}
        self.ep2turn: dict[str, str] = {}
        self.turn_ids: dict[str, list[str]] = {}
        self.turn_vecs: dict[str, np.ndarray] = {}
        self.record_s = 0.0

    def load(self) -> None:
        t0 = time.perf_counter()
        for p in self.data["personas"]:
            ns = self.mem.namespace(p["name"])
            self.ns[p["name"]] = ns
            ids = [t["id"] for t in p["turns"]]
            self.turn_ids[p["name"]] = ids
            vecs = self.embedder.embed_array([t["text"] for t in p["turns"]]) if self.embedder else None
            if vecs is not None:
                self.turn_vecs[p["name"]] = vecs
            for i, t in enumerate(p["turns"]):
                kw: dict[str, Any] = dict(
                    participants=[t["speaker"]], timestamp=dt.datetime.fromisoformat(t["ts"])
                )
                if self.engine_vectors and vecs is not None:
                    kw["embedding"] = vecs[i].tolist()
                eid = ns.episodic.record(t["text"], **kw)
                self.ep2turn[eid] = t["id"]
        self.mem.flush()
        self.record_s = time.perf_counter() - t0

    def bm25(self, persona: str, q: str) -> list[tuple[str, float]]:
        hits = self.ns[persona].episodic.search(q, limit=DEPTH)
        return [(self.ep2turn[h.episode.id], h.score) for h in hits]

    def cosine(self, persona: str, qv: np.ndarray) -> list[tuple[str, float]]:
        sims = self.turn_vecs[persona] @ qv
        order = np.argsort(-sims, kind="stable")[:DEPTH]
        ids = self.turn_ids[persona]
        return [(ids[i], float(sims[i])) for i in order]

    def engine(self, persona: str, q: str, qv: np.ndarray, **kw: Any) -> Ranked:
        hits = self.ns[persona].episodic.search(q, embedding=qv.tolist(), limit=10, **kw)
        return [self.ep2turn[h.episode.id] for h in hits]


def linear(bm: list[tuple[str, float]], vec: list[tuple[str, float]], wb: float, wv: float) -> Ranked:
    scores: dict[str, float] = {}
    mx = max((s for _, s in bm), default=0.0)
    for tid, s in bm:
        scores[tid] = scores.get(tid, 0.0) + (wb * s / mx if mx > 0 else 0.0)
    for tid, c in vec:
        scores[tid] = scores.get(tid, 0.0) + wv * max(c, 0.0)
    return [t for t, _ in sorted(scores.items(), key=lambda kv: -kv[1])]


ADAPTIVE_PEAK_DEPTH = 50
ADAPTIVE_PEAK_GAIN = 1.0


def adaptive(bm: list[tuple[str, float]], vec: list[tuple[str, float]], wb: float, wv: float) -> Ranked:
    """The engine's default fusion (core/src/vectors.rs, `FusionMethod::Adaptive`)."""
    def norm(lst: list[tuple[str, float]]) -> dict[str, float]:
        # Statistics over at least ADAPTIVE_PEAK_DEPTH slots, missing ones counting 0.
        if not lst:
            return {}
        pad = max(0, ADAPTIVE_PEAK_DEPTH - len(lst))
        a = np.array([s for _, s in lst] + [0.0] * pad, dtype=np.float64)
        sd = a.std()
        return {t: ((s - a.min()) / sd if sd > 0 else 1.0) for t, s in lst}
    conf = 0.0
    if bm and bm[0][1] > 0:
        peak = 1.0 - sum(s for _, s in bm[:ADAPTIVE_PEAK_DEPTH]) / (ADAPTIVE_PEAK_DEPTH * bm[0][1])
        conf = min(1.0, ADAPTIVE_PEAK_GAIN * max(peak, 0.0))
    scores: dict[str, float] = {}
    for tid, s in norm(bm).items():
        scores[tid] = scores.get(tid, 0.0) + wb * conf * s
    for tid, s in norm(vec).items():
        scores[tid] = scores.get(tid, 0.0) + wv * s
    return [t for t, _ in sorted(scores.items(), key=lambda kv: -kv[1])]


def rrf(bm: list[tuple[str, float]], vec: list[tuple[str, float]], wb: float, wv: float, k: float) -> Ranked:
    scores: dict[str, float] = {}
    for r, (tid, _) in enumerate(bm, 1):
        scores[tid] = scores.get(tid, 0.0) + wb / (k + r)
    for r, (tid, _) in enumerate(vec, 1):
        scores[tid] = scores.get(tid, 0.0) + wv / (k + r)
    return [t for t, _ in sorted(scores.items(), key=lambda kv: -kv[1])]


class Fts5:
    """SQLite FTS5 over the same turns, one table per tokenizer, the question's words OR-ed."""

    def __init__(self, data: dict[str, Any], tokenizer: str):
        self.db = sqlite3.connect(":memory:")
        self.db.execute(f"CREATE VIRTUAL TABLE t USING fts5(persona UNINDEXED, tid UNINDEXED, body, tokenize='{tokenizer}')")
        rows = [(p["name"], t["id"], t["text"]) for p in data["personas"] for t in p["turns"]]
        self.db.executemany("INSERT INTO t VALUES (?, ?, ?)", rows)

    def search(self, persona: str, q: str) -> Ranked:
        words = re.findall(r"\w+", q.lower())
        if not words:
            return []
        match = " OR ".join('"' + w + '"' for w in words)
        cur = self.db.execute(
            "SELECT tid FROM t WHERE t MATCH ? AND persona = ? ORDER BY bm25(t) LIMIT ?",
            (match, persona, DEPTH),
        )
        return [r[0] for r in cur]


def score(ranked: Ranked, gold: list[str]) -> dict[str, float]:
    g = set(gold)
    out = {f"r@{k}": len(g.intersection(ranked[:k])) / len(g) for k in KS}
    rr = 0.0
    for i, tid in enumerate(ranked[:10], 1):
        if tid in g:
            rr = 1.0 / i
            break
    out["mrr"] = rr
    return out


def evaluate(questions: list[dict[str, Any]], rank: Callable[[dict[str, Any]], Ranked]) -> dict[str, Any]:
    per_kind: dict[str, list[float]] = {}
    tot = {f"r@{k}": 0.0 for k in KS} | {"mrr": 0.0}
    for q in questions:
        s = score(rank(q), q["gold"])
        for m in tot:
            tot[m] += s[m]
        per_kind.setdefault(q["kind"], []).append(s["r@10"])
        per_kind.setdefault(q["style"], []).append(s["r@10"])
    n = len(questions)
    res = {m: v / n for m, v in tot.items()}
    res["kinds"] = {k: sum(v) / len(v) for k, v in per_kind.items()}
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", help="markdown section to write")
    ap.add_argument("--json", help="raw results as JSON")
    ap.add_argument("--cache", default=None, help="embedding cache dir (default $CARGO_TARGET_DIR/bench/embcache)")
    ap.add_argument("--bm25-only", action="store_true", help="lexical methods only (no model)")
    ap.add_argument("--harness-side", action="store_true", help="fuse in the harness even if the engine can")
    args = ap.parse_args()

    started = time.perf_counter()
    data = generate.generate()
    questions = data["questions"]
    nturns = sum(len(p["turns"]) for p in data["personas"])
    embedder = None
    model = "none (--bm25-only)"
    if not args.bm25_only:
        import embed

        target = Path(os.environ.get("CARGO_TARGET_DIR", HERE.parent.parent / "target"))
        embedder = embed.Embedder(cache_dir=args.cache or target / "bench" / "embcache")
        model = embed.MODEL_NAME
    h = Harness(data, embedder, False if (args.harness_side or embedder is None) else None)
    h.load()
    qvecs: dict[str, np.ndarray] = {}
    if embedder is not None:
        mat = embedder.embed_array([q["text"] for q in questions])
        qvecs = {q["id"]: mat[i] for i, q in enumerate(questions)}

    bm_cache: dict[str, list[tuple[str, float]]] = {}
    vec_cache: dict[str, list[tuple[str, float]]] = {}

    def bm(q: dict[str, Any]) -> list[tuple[str, float]]:
        if q["id"] not in bm_cache:
            bm_cache[q["id"]] = h.bm25(q["persona"], q["text"])
        return bm_cache[q["id"]]

    def vec(q: dict[str, Any]) -> list[tuple[str, float]]:
        if q["id"] not in vec_cache:
            vec_cache[q["id"]] = h.cosine(q["persona"], qvecs[q["id"]])
        return vec_cache[q["id"]]

    rows: list[tuple[str, str, dict[str, Any]]] = []  # (method, where, result)
    t0 = time.perf_counter()
    rows.append(("BM25", "engine", evaluate(questions, lambda q: [t for t, _ in bm(q)])))
    bm25_s = time.perf_counter() - t0
    for tok, label in (("unicode61", "SQLite FTS5 (unicode61)"), ("porter unicode61", "SQLite FTS5 (porter)")):
        f = Fts5(data, tok)
        rows.append((label, "sqlite", evaluate(questions, lambda q, f=f: f.search(q["persona"], q["text"]))))
    if embedder is not None:
        if h.engine_vectors:
            where = "engine"
            rows.append(("vector only", where, evaluate(questions, lambda q: h.engine(q["persona"], "", qvecs[q["id"]]))))
            rows.append(("**adaptive, bm25 0.5 / vector 0.5 (default)**", where, evaluate(
                questions, lambda q: h.engine(q["persona"], q["text"], qvecs[q["id"]]))))
            for wv in VECTOR_WEIGHTS:
                rows.append((f"linear, bm25 {1 - wv:.1f} / vector {wv:.1f}", where, evaluate(
                    questions, lambda q, wv=wv: h.engine(q["persona"], q["text"], qvecs[q["id"]], fusion="linear",
                                                         bm25_weight=1 - wv, vector_weight=wv))))
            for wv in VECTOR_WEIGHTS:
                rows.append((f"RRF k={RRF_K:g}, bm25 {1 - wv:.1f} / vector {wv:.1f}", where, evaluate(
                    questions, lambda q, wv=wv: h.engine(q["persona"], q["text"], qvecs[q["id"]], fusion="rrf",
                                                         bm25_weight=1 - wv, vector_weight=wv, rrf_k=RRF_K))))
            rows.append((f"RRF k={RRF_K:g}, bm25 1.0 / vector 1.0", where, evaluate(
                questions, lambda q: h.engine(q["persona"], q["text"], qvecs[q["id"]], fusion="rrf",
                                              bm25_weight=1.0, vector_weight=1.0, rrf_k=RRF_K))))
        else:
            where = "harness-side"
            rows.append(("vector only", where, evaluate(questions, lambda q: [t for t, _ in vec(q)])))
            rows.append(("**adaptive, bm25 0.5 / vector 0.5 (default)**", where,
                         evaluate(questions, lambda q: adaptive(bm(q), vec(q), 0.5, 0.5))))
            for wv in VECTOR_WEIGHTS:
                rows.append((f"linear, bm25 {1 - wv:.1f} / vector {wv:.1f}", where,
                             evaluate(questions, lambda q, wv=wv: linear(bm(q), vec(q), 1 - wv, wv))))
            for wv in VECTOR_WEIGHTS:
                rows.append((f"RRF k={RRF_K:g}, bm25 {1 - wv:.1f} / vector {wv:.1f}", where,
                             evaluate(questions, lambda q, wv=wv: rrf(bm(q), vec(q), 1 - wv, wv, RRF_K))))
            rows.append((f"RRF k={RRF_K:g}, bm25 1.0 / vector 1.0", where,
                         evaluate(questions, lambda q: rrf(bm(q), vec(q), 1.0, 1.0, RRF_K))))
    elapsed = time.perf_counter() - started
    h.mem.close()
    h.tmp.cleanup()

    kinds = sorted({q["style"] for q in questions}) + sorted({q["kind"] for q in questions})
    lines = [
        "## Retrieval quality",
        "",
        f"convmem (seed {data['seed']}): {len(data['personas'])} personas, {nturns} dialogue turns recorded as "
        f"episodes, {len(questions)} questions ("
        + ", ".join(f"{sum(1 for q in questions if k in (q['kind'], q['style']))} {k}" for k in kinds)
        + f"). Embedding model: {model}. Fusion depth {DEPTH} per list. "
        f"Recording took {h.record_s:.1f} s, the BM25 pass {bm25_s:.1f} s, the whole harness {elapsed:.0f} s "
        f"(embeddings {'computed: ' + str(embedder.computed) + ' texts' if embedder else 'not used'}).",
        "",
        "| method | computed | recall@1 | recall@5 | recall@10 | MRR@10 | "
        + " | ".join(f"r@10 {k}" for k in kinds) + " |",
        "|---|---|---:|---:|---:|---:|" + "---:|" * len(kinds),
    ]
    for method, where, r in rows:
        lines.append(
            f"| {method} | {where} | {r['r@1']:.3f} | {r['r@5']:.3f} | {r['r@10']:.3f} | {r['mrr']:.3f} | "
            + " | ".join(f"{r['kinds'].get(k, 0):.3f}" for k in kinds) + " |"
        )
    lines.append("")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text, encoding="utf-8")
    if args.json:
        Path(args.json).write_text(json.dumps(
            dict(model=model, seed=data["seed"], turns=nturns, questions=len(questions),
                 rows=[dict(method=m, where=w, **r) for m, w, r in rows]), indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
