"""Peers measured in the same process on the same memories and vectors.

- ``Fts5``: SQLite FTS5 (Python's sqlite3, porter stemmer over unicode61), the
  question's words OR-ed, ranked by ``bm25()``.
- ``Lance``: LanceDB (pip ``lancedb``), one table per namespace with the same
  float32 vectors and text, its native full-text index (stemmed English, stop
  words removed: its defaults), and three searches: full-text only, vector only
  (exact: no vector index is built, as the engine's scan is exact), and hybrid
  with its default reranker (RRF, k = 60).
"""

from __future__ import annotations

import re
import sqlite3
import tempfile
from typing import Any

import numpy as np


class Fts5:
    def __init__(self, data: dict[str, Any], tokenizer: str = "porter unicode61"):
        self.db = sqlite3.connect(":memory:")
        self.db.execute(f"CREATE VIRTUAL TABLE t USING fts5(ns UNINDEXED, did UNINDEXED, body, tokenize='{tokenizer}')")
        self.db.executemany("INSERT INTO t VALUES (?, ?, ?)", [(d["ns"], d["id"], d["text"]) for d in data["docs"]])

    def search(self, q: dict[str, Any], limit: int = 10) -> list[str]:
        words = re.findall(r"\w+", q["text"].lower())
        if not words:
            return []
        match = " OR ".join('"' + w + '"' for w in words)
        cur = self.db.execute("SELECT did FROM t WHERE t MATCH ? AND ns = ? ORDER BY bm25(t) LIMIT ?",
                              (match, q["ns"], limit))
        return [r[0] for r in cur]


class Lance:
    def __init__(self, data: dict[str, Any], doc_vecs: np.ndarray):
        import lancedb
        import pyarrow as pa

        self.tmp = tempfile.TemporaryDirectory(prefix="retrieval-lance-")
        self.db = lancedb.connect(self.tmp.name)
        self.tables: dict[str, Any] = {}
        by_ns: dict[str, list[int]] = {}
        for i, d in enumerate(data["docs"]):
            by_ns.setdefault(d["ns"], []).append(i)
        dim = doc_vecs.shape[1]
        for n, (ns, idx) in enumerate(by_ns.items()):
            tab = pa.table({
                "did": pa.array([data["docs"][i]["id"] for i in idx]),
                "text": pa.array([data["docs"][i]["text"] for i in idx]),
                "vector": pa.FixedSizeListArray.from_arrays(pa.array(doc_vecs[idx].reshape(-1), pa.float32()), dim),
            })
            t = self.db.create_table(f"t{n}", data=tab)
            t.create_fts_index("text")
            self.tables[ns] = t

    def fts(self, q: dict[str, Any], qv: np.ndarray, limit: int = 10) -> list[str]:
        text = _fts_text(q["text"])
        if not text:
            return []
        rows = self.tables[q["ns"]].search(text, query_type="fts").limit(limit).select(["did"]).to_list()
        return [r["did"] for r in rows]

    def vector(self, q: dict[str, Any], qv: np.ndarray, limit: int = 10) -> list[str]:
        rows = (self.tables[q["ns"]].search(qv.astype(np.float32), query_type="vector")
                .distance_type("cosine").limit(limit).select(["did"]).to_list())
        return [r["did"] for r in rows]

    def hybrid(self, q: dict[str, Any], qv: np.ndarray, limit: int = 10) -> list[str]:
        text = _fts_text(q["text"])
        if not text:
            return self.vector(q, qv, limit)
        rows = (self.tables[q["ns"]].search(query_type="hybrid").vector(qv.astype(np.float32)).text(text)
                .distance_type("cosine").limit(limit).select(["did"]).to_list())
        return [r["did"] for r in rows]

    def close(self) -> None:
        self.tmp.cleanup()


def _fts_text(s: str) -> str:
    # LanceDB's FTS parses its query string; plain words only.
    return " ".join(re.findall(r"\w+", s))
