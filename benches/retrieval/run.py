"""Retrieval-quality harness: recall@1/5/10, MRR and latency, per set and embedder.

Sets (``evalsets.py``): the generated ``convmem``, and the public ``friendsqa``
and ``molweni`` read from the local cache (a set whose files are absent is
reported as absent, with how to install it). Embedders (``embed.py``):
all-MiniLM-L6-v2 int8 (``minilm``) and the stronger multilingual-e5-small 4-bit
(``e5``); paraphrase-MiniLM-L3-v2 (``l3``, weaker) on request.

Every memory of a set is recorded as one episode through the memstrata Python
binding (summary = text, participants = speakers, ``embedding=`` the memory's
vector), one namespace per set namespace; every question is searched as typed
in its namespace. Rows, all in one process on the same vectors:

- engine: BM25 (no embedding), vectors only (empty query + embedding), the
  default fusion, and the other fusions (linear 0.5/0.5, RRF k = 60 1/1);
- harness-side: the previous default (``adaptive`` before issue #27, computed in
  numpy from the engine's BM25 list and exact cosine, ``calibration_study.py``);
- peers: SQLite FTS5 (porter), LanceDB full-text, vector and hybrid (its default
  RRF reranker), same texts and vectors (``peers.py``).

Metrics: recall@k = share of a question's gold memories in the top k, averaged
over questions; MRR = mean of 1 / rank of the first gold memory in the top 10
(0 when none); p50/p95 = per-search latency in this process (ms), embedding
excluded (vectors are precomputed and cached). Usage:

    python run.py --out target/bench/retrieval.md [--json FILE] [--sets a,b] [--models minilm,e5] [--no-peers]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import calibration_study  # noqa: E402
import evalsets  # noqa: E402
import lists  # noqa: E402
import peers  # noqa: E402

KS = (1, 5, 10)


def score(ranked: list[str], gold: list[str]) -> dict[str, float]:
    g = set(gold)
    out = {f"r@{k}": len(g.intersection(ranked[:k])) / len(g) for k in KS}
    out["mrr"] = next((1.0 / i for i, t in enumerate(ranked[:10], 1) if t in g), 0.0)
    return out


def evaluate(questions: list[dict[str, Any]], rank: Callable[[int, dict[str, Any]], list[str]]) -> dict[str, Any]:
    tot = {f"r@{k}": 0.0 for k in KS} | {"mrr": 0.0}
    lat: list[float] = []
    for i, q in enumerate(questions):
        t0 = time.perf_counter()
        ranked = rank(i, q)
        lat.append(time.perf_counter() - t0)
        s = score(ranked, q["gold"])
        for m in tot:
            tot[m] += s[m]
    n = max(len(questions), 1)
    res: dict[str, Any] = {m: v / n for m, v in tot.items()}
    res["p50"] = float(np.percentile(lat, 50)) * 1e3 if lat else 0.0
    res["p95"] = float(np.percentile(lat, 95)) * 1e3 if lat else 0.0
    return res


def run_set(data: dict[str, Any], model: str, cache: Path, with_peers: bool) -> tuple[list[tuple[str, str, dict]], dict]:
    import embed

    emb = embed.Embedder(cache_dir=cache, model=model)
    t0 = time.perf_counter()
    dv = emb.embed_array([d["text"] for d in data["docs"]])
    qv = emb.embed_array([q["text"] for q in data["questions"]], query=True)
    embed_s = time.perf_counter() - t0
    st = lists.Store(data, dv)
    qs = data["questions"]
    rows: list[tuple[str, str, dict]] = []
    rows.append(("BM25", "engine", evaluate(qs, lambda i, q: [t for t, _ in st.bm25(q, 10)])))
    rows.append(("vectors only", "engine", evaluate(qs, lambda i, q: st.engine(q, qv[i], text=""))))
    rows.append(("**default (adaptive)**", "engine", evaluate(qs, lambda i, q: st.engine(q, qv[i]))))
    rows.append(("RRF k=60, 1 / 1", "engine", evaluate(
        qs, lambda i, q: st.engine(q, qv[i], fusion="rrf", bm25_weight=1.0, vector_weight=1.0, rrf_k=60.0))))
    rows.append(("linear 0.5 / 0.5", "engine", evaluate(
        qs, lambda i, q: st.engine(q, qv[i], fusion="linear", bm25_weight=0.5, vector_weight=0.5))))
    rows.append(("previous default (adaptive before #27)", "harness", evaluate(
        qs, lambda i, q: calibration_study.old_adaptive(st.bm25(q), st.cosine(q, qv[i]), None))))
    meta = dict(docs=len(data["docs"]), questions=len(qs), record_s=st.record_s, embed_s=embed_s,
                computed=emb.computed, model=emb.name)
    st.close()
    if with_peers:
        f = peers.Fts5(data)
        rows.append(("SQLite FTS5 (porter)", "sqlite", evaluate(qs, lambda i, q: f.search(q))))
        try:
            lance = peers.Lance(data, dv)
        except ImportError as e:
            print(f"LanceDB not measured: {e}", file=sys.stderr)
        else:
            rows.append(("LanceDB full-text", "lancedb", evaluate(qs, lambda i, q: lance.fts(q, qv[i]))))
            rows.append(("LanceDB vectors", "lancedb", evaluate(qs, lambda i, q: lance.vector(q, qv[i]))))
            rows.append(("LanceDB hybrid (RRF, its default)", "lancedb", evaluate(qs, lambda i, q: lance.hybrid(q, qv[i]))))
            lance.close()
    return rows, meta


def write(args: argparse.Namespace, started: float, lines: list[str], summary: list[str], absent: list[str],
          results: list[dict[str, Any]], final: bool) -> None:
    head = [f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; "
            f"whole harness {time.perf_counter() - started:.0f} s" + ("." if final else " so far (unfinished)."), "",
            "Summary (recall@10):", "", *summary, ""]
    if absent:
        head += ["Absent (not measured):", "", *[f"- {a}" for a in absent], ""]
    text = "\n".join(lines[:2] + head + lines[2:]) + "\n"
    if final:
        print(text)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text, encoding="utf-8")
    if args.json:
        Path(args.json).write_text(json.dumps(dict(results=results, absent=absent), indent=1), encoding="utf-8")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", help="markdown section to write")
    ap.add_argument("--json", help="raw results as JSON")
    ap.add_argument("--cache", default=None, help="embedding cache dir (default $CARGO_TARGET_DIR/bench/embcache)")
    ap.add_argument("--sets", default="convmem,friendsqa,molweni,friendsqa-mini,molweni-mini")
    ap.add_argument("--models", default="minilm,e5")
    ap.add_argument("--no-peers", action="store_true")
    args = ap.parse_args()
    target = Path(os.environ.get("CARGO_TARGET_DIR", HERE.parent.parent / "target"))
    cache = Path(args.cache) if args.cache else target / "bench" / "embcache"
    started = time.perf_counter()
    lines = ["## Retrieval quality", ""]
    results: list[dict[str, Any]] = []
    absent: list[str] = []
    summary = ["| set | embedder | BM25 | vectors | **default** | max(BM25, vectors) | default ≥ max | LanceDB hybrid | default ≥ LanceDB |",
               "|---|---|---:|---:|---:|---:|:-:|---:|:-:|"]
    for sname in args.sets.split(","):
        try:
            data = evalsets.load(sname)
        except evalsets.Absent as e:
            print(f"== {e}", file=sys.stderr)
            absent.append(str(e))
            continue
        for model in args.models.split(","):
            try:
                rows, meta = run_set(data, model, cache, not args.no_peers)
            except RuntimeError as e:  # a model package missing
                print(f"== {sname} / {model}: {e}", file=sys.stderr)
                absent.append(f"{sname} / {model}: {e}")
                continue
            r = {m: x for m, _, x in rows}
            bm, ve, de = r["BM25"]["r@10"], r["vectors only"]["r@10"], r["**default (adaptive)**"]["r@10"]
            la = r.get("LanceDB hybrid (RRF, its default)", {}).get("r@10")
            summary.append(f"| {sname} | {model} | {bm:.3f} | {ve:.3f} | **{de:.3f}** | {max(bm, ve):.3f} | "
                           f"{'yes' if de >= max(bm, ve) else 'NO'} | " + (f"{la:.3f} | {'yes' if de >= la else 'NO'} |"
                                                                            if la is not None else "- | - |"))
            lines += [f"### {sname}, {meta['model']}", "",
                      f"{data['about']}. {meta['docs']} memories, {meta['questions']} questions; recording took "
                      f"{meta['record_s']:.1f} s (embeddings: {meta['computed']} texts computed, the rest cached).", "",
                      "| method | computed by | recall@1 | recall@5 | recall@10 | MRR@10 | p50 ms | p95 ms |",
                      "|---|---|---:|---:|---:|---:|---:|---:|"]
            for m, where, x in rows:
                lines.append(f"| {m} | {where} | {x['r@1']:.3f} | {x['r@5']:.3f} | {x['r@10']:.3f} | {x['mrr']:.3f} | "
                             f"{x['p50']:.2f} | {x['p95']:.2f} |")
            lines.append("")
            results.append(dict(set=sname, model=model, meta=meta, rows=[dict(method=m, where=w, **x) for m, w, x in rows]))
            print("\n".join(summary), flush=True)
            write(args, started, lines, summary, absent, results, False)
    write(args, started, lines, summary, absent, results, True)


if __name__ == "__main__":
    main()
