"""Lexical quality: field weights and question-word weighting, re-measured on the sets.

The engine weighs a query term by field (summary 1.5, content 1.0, participants
1.0, tags 1.2) and weighs the engine's question words and stop words
(``QUERY_STOP_WORDS``) at ``STOP_WORD_WEIGHT`` = 0.5. Without rebuilding the
engine, the harness can move a memory's text between fields and drop words
from the question, which measures the same ratios:

- *text in summary* (the default recording): text weighs 1.5 against the
  speakers' 1.0 in participants;
- *text in content* (summary = the speakers' names, content = the text): text
  weighs 1.0, like participants (a summary/content ratio of 1 instead of 1.5);
- *no participants*: speakers not indexed at all (participant weight 0);
- *speakers in the text*: "Name: text" as the summary, no participants field
  (names at the text's weight);
- *question words dropped*: the question searched with its stop words removed
  (``STOP_WORD_WEIGHT`` = 0 instead of 0.5).

BM25 alone, recall@1/5/10 and MRR@10, every set. Tags are not measured: none
of the sets has tags.

    PYTHONPATH=<memstrata binding> python lexical_study.py [--sets a,b] [--out FILE.md]
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import calibration_study  # noqa: E402
import evalsets  # noqa: E402

import memstrata  # noqa: E402

Recorder = Callable[[Any, dict[str, Any]], str]


def _ts(d: dict[str, Any]) -> dict[str, Any]:
    return {"timestamp": dt.datetime.fromisoformat(d["ts"])} if d.get("ts") else {}


VARIANTS: dict[str, Recorder] = {
    "text in summary (default)": lambda h, d: h.episodic.record(d["text"], participants=d["speakers"], **_ts(d)),
    "text in content": lambda h, d: h.episodic.record(", ".join(d["speakers"]) or "-", d["text"],
                                                      participants=d["speakers"], **_ts(d)),
    "no participants": lambda h, d: h.episodic.record(d["text"], **_ts(d)),
    "speakers in the text": lambda h, d: h.episodic.record(f"{', '.join(d['speakers'])}: {d['text']}", **_ts(d)),
}


def measure(data: dict[str, Any], record: Recorder, content_words_only: bool) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="memstrata-lexical-") as tmp:
        mem = memstrata.Memory(str(Path(tmp) / "lex.mem"), durability="periodic")
        handles: dict[str, Any] = {}
        ep2doc: dict[str, str] = {}
        for d in data["docs"]:
            h = handles.setdefault(d["ns"], mem.namespace(d["ns"]))
            ep2doc[record(h, d)] = d["id"]
        mem.flush()
        tot = {"r@1": 0.0, "r@5": 0.0, "r@10": 0.0, "mrr": 0.0}
        for q in data["questions"]:
            text = q["text"]
            if content_words_only:
                text = calibration_study.content_text(text) or text
            ranked = [ep2doc[h.episode.id] for h in handles[q["ns"]].episodic.search(text, limit=10)]
            g = set(q["gold"])
            for k in (1, 5, 10):
                tot[f"r@{k}"] += len(g.intersection(ranked[:k])) / len(g)
            tot["mrr"] += next((1.0 / i for i, t in enumerate(ranked, 1) if t in g), 0.0)
        mem.close()
    n = max(len(data["questions"]), 1)
    return {k: v / n for k, v in tot.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sets", default="convmem,friendsqa,molweni,friendsqa-mini,molweni-mini")
    ap.add_argument("--out")
    args = ap.parse_args()
    out = ["| set | recording | question words | recall@1 | recall@5 | recall@10 | MRR@10 |",
           "|---|---|---|---:|---:|---:|---:|"]
    for sname in args.sets.split(","):
        try:
            data = evalsets.load(sname)
        except evalsets.Absent as e:
            print(e)
            continue
        runs = [(name, rec, False) for name, rec in VARIANTS.items()]
        runs.append(("text in summary (default)", VARIANTS["text in summary (default)"], True))
        for name, rec, drop in runs:
            r = measure(data, rec, drop)
            row = (f"| {sname} | {name} | {'dropped (weight 0)' if drop else 'weight 0.5 (default)'} | "
                   f"{r['r@1']:.3f} | {r['r@5']:.3f} | {r['r@10']:.3f} | {r['mrr']:.3f} |")
            print(row, flush=True)
            out.append(row)
    text = "\n".join(out) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
