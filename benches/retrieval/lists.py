"""The engine side of the harness: one set recorded into a Memory, its lists per question.

``Store(set, doc_vecs)`` records every memory of a set (``evalsets.py``) as one
episode (summary = text, participants = speakers, timestamp when the set has
one, ``embedding=`` when vectors are given) in its namespace. ``bm25(q)`` is
the engine's BM25 list with scores, ``cosine(q, qv)`` exact numpy cosine over
the question's namespace (both ``depth`` deep, best first), ``engine(q, qv,
**fusion)`` the engine's own fused top 10 (or vector-only with ``text=""``),
``background(q, qv)`` the mean and σ of the question's cosine over every
memory of its namespace and their number.
"""

from __future__ import annotations

import datetime as dt
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

import numpy as np

import memstrata

DEPTH = 50  # max(limit * 5, 50) with limit = 10

Pair = tuple[str, float]


class Store:
    def __init__(self, data: dict[str, Any], doc_vecs: Optional[np.ndarray], **record_kw: Any):
        self.data = data
        self.tmp = tempfile.TemporaryDirectory(prefix="memstrata-retrieval-")
        self.mem = memstrata.Memory(Path(self.tmp.name) / "eval.mem", durability="periodic")
        self.ns: dict[str, Any] = {}
        self.ep2doc: dict[str, str] = {}
        self.ids: dict[str, list[str]] = {}
        self.vecs: dict[str, np.ndarray] = {}
        t0 = time.perf_counter()
        rows: dict[str, list[int]] = {}
        for i, d in enumerate(data["docs"]):
            rows.setdefault(d["ns"], []).append(i)
        for ns, idx in rows.items():
            handle = self.mem.namespace(ns)
            self.ns[ns] = handle
            self.ids[ns] = [data["docs"][i]["id"] for i in idx]
            if doc_vecs is not None:
                self.vecs[ns] = doc_vecs[idx]
            for j, i in enumerate(idx):
                d = data["docs"][i]
                kw: dict[str, Any] = dict(participants=d["speakers"])
                if d.get("ts"):
                    kw["timestamp"] = dt.datetime.fromisoformat(d["ts"])
                if doc_vecs is not None:
                    kw["embedding"] = doc_vecs[i].tolist()
                kw.update(record_kw)
                eid = handle.episodic.record(d["text"], **kw)
                self.ep2doc[eid] = d["id"]
        self.mem.flush()
        self.record_s = time.perf_counter() - t0

    def bm25(self, q: dict[str, Any], depth: int = DEPTH) -> list[Pair]:
        hits = self.ns[q["ns"]].episodic.search(q["text"], limit=depth)
        return [(self.ep2doc[h.episode.id], h.score) for h in hits if h.score > 0]

    def cosine(self, q: dict[str, Any], qv: np.ndarray, depth: int = DEPTH) -> list[Pair]:
        sims = self.vecs[q["ns"]] @ qv
        order = np.argsort(-sims, kind="stable")[:depth]
        ids = self.ids[q["ns"]]
        return [(ids[i], float(sims[i])) for i in order]

    def background(self, q: dict[str, Any], qv: np.ndarray) -> tuple[float, float, int]:
        """Mean and σ of the question's cosine over its namespace, and how many vectors it holds."""
        sims = self.vecs[q["ns"]] @ qv
        return float(sims.mean()), float(sims.std()), len(sims)

    def engine(self, q: dict[str, Any], qv: np.ndarray, text: Optional[str] = None, **kw: Any) -> list[str]:
        hits = self.ns[q["ns"]].episodic.search(q["text"] if text is None else text, embedding=qv.tolist(),
                                                limit=10, **kw)
        return [self.ep2doc[h.episode.id] for h in hits]

    def close(self) -> None:
        self.mem.close()
        self.tmp.cleanup()
