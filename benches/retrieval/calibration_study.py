"""Which fusion never loses to its parts, across sets and embedders.

Every candidate is computed harness-side, from the engine's BM25 list (with its
scores, 50 deep) and exact numpy cosine (50 deep), for every set available
(``evalsets.py``) and both embedders (``embed.py``), and reported as recall@10
next to BM25 alone, vectors alone and max(BM25, vectors). No constant is fitted
per set: each candidate is one formula with fixed constants, and the question is
whether it stays at or above the better list everywhere.

    PYTHONPATH=<memstrata binding> python calibration_study.py [--out FILE.md] [--sets a,b] [--models minilm,e5] [--only a,b]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import evalsets  # noqa: E402
import embed  # noqa: E402
import lists  # noqa: E402

Pair = tuple[str, float]


def order(scores: dict[str, float]) -> list[str]:
    return [t for t, _ in sorted(scores.items(), key=lambda kv: -kv[1])]


def rrf(bm: list[Pair], vec: list[Pair], wb: float = 1.0, wv: float = 1.0, k: float = 60.0) -> list[str]:
    s: dict[str, float] = {}
    for r, (t, _) in enumerate(bm, 1):
        s[t] = s.get(t, 0.0) + wb / (k + r)
    for r, (t, _) in enumerate(vec, 1):
        s[t] = s.get(t, 0.0) + wv / (k + r)
    return order(s)


def padded(lst: list[Pair], n: int = 50) -> np.ndarray:
    return np.array([x for _, x in lst] + [0.0] * max(0, n - len(lst)), dtype=np.float64)


def peak(lst: list[Pair], n: int = 50) -> float:
    if not lst or lst[0][1] <= 0:
        return 0.0
    return max(0.0, 1.0 - float(padded(lst, n)[:n].sum()) / (n * lst[0][1]))


def old_adaptive(bm: list[Pair], vec: list[Pair], bg: Any) -> list[str]:
    def norm(lst: list[Pair]) -> dict[str, float]:
        if not lst:
            return {}
        a = padded(lst)
        sd = a.std()
        return {t: ((x - a.min()) / sd if sd > 0 else 1.0) for t, x in lst}
    conf = min(1.0, peak(bm))
    s: dict[str, float] = {}
    for t, x in norm(bm).items():
        s[t] = s.get(t, 0.0) + 0.5 * conf * x
    for t, x in norm(vec).items():
        s[t] = s.get(t, 0.0) + 0.5 * x
    return order(s)


def tail_z(lst: list[Pair], lo: int, hi: int) -> dict[str, float]:
    """z-score of each hit against the list's own tail (ranks lo..hi), floored at 0."""
    if not lst:
        return {}
    a = np.array([x for _, x in lst], dtype=np.float64)
    tail = a[lo:hi] if len(a) > lo + 2 else a[-3:]
    mu, sd = float(tail.mean()), float(tail.std())
    sd = max(sd, 1e-6 * max(abs(mu), 1.0))
    return {t: max(0.0, (x - mu) / sd) for t, x in lst}


def tail_z_pad(lst: list[Pair], lo: int, hi: int, n: int = 50) -> dict[str, float]:
    """As tail_z, the list padded with zeros to n entries first (a memory absent from a
    BM25 list matched no word: its score is 0)."""
    if not lst:
        return {}
    a = padded(lst, n)
    tail = a[lo:hi]
    mu, sd = float(tail.mean()), float(tail.std())
    if sd <= 0:
        sd = max(float(a.std()), 1e-6)
    return {t: max(0.0, (x - mu) / sd) for t, x in lst}


def zsum_pad(bm: list[Pair], vec: list[Pair], bg: Any, lo: int = 10, hi: int = 50, wb: float = 1.0) -> list[str]:
    s: dict[str, float] = {}
    for t, x in tail_z_pad(bm, lo, hi).items():
        s[t] = s.get(t, 0.0) + wb * x
    for t, x in tail_z_pad(vec, lo, hi).items():
        s[t] = s.get(t, 0.0) + x
    return order(s)


def zsum(bm: list[Pair], vec: list[Pair], bg: Any, lo: int = 10, hi: int = 50) -> list[str]:
    s: dict[str, float] = {}
    for t, x in tail_z(bm, lo, hi).items():
        s[t] = s.get(t, 0.0) + x
    for t, x in tail_z(vec, lo, hi).items():
        s[t] = s.get(t, 0.0) + x
    return order(s)


def chance_z(n: float) -> float:
    return float(np.sqrt(2 * np.log(n))) if n > 1 else 0.0


def adaptive(bm: list[Pair], vec: list[Pair], bg: Any, wb: float = 0.5, wv: float = 0.5) -> list[str]:
    """The engine's default from issue #27's first round until the third (the baseline of
    the first two rounds; the default now is `Evidence` below): each list's z against its own tail (ranks 11..50, missing slots 0), less the z
    its best hit reaches by chance among its candidates, floored at 0; the list whose
    best z is lower scaled by the ratio of the two best z; weighted sum."""
    zb = tail_z_pad(bm, 10, 50)
    zv = tail_z_pad(vec, 10, 50)
    cb = chance_z(1 + min(len(bm), 50) / 10)
    cv = chance_z(max(bg[2], len(vec)) / 50)
    zb = {t: max(0.0, x - cb) for t, x in zb.items()}
    zv = {t: max(0.0, x - cv) for t, x in zv.items()}
    # The list whose best hit stands out less is scaled by the ratio of the best z.
    mb, mv = max(zb.values(), default=0.0), max(zv.values(), default=0.0)
    if mb >= mv and mb > 0:
        wv *= mv / mb
    elif mv > mb:
        wb *= mb / mv
    s: dict[str, float] = {}
    for t, x in zb.items():
        s[t] = s.get(t, 0.0) + wb * x
    for t, x in zv.items():
        s[t] = s.get(t, 0.0) + wv * x
    return order(s)


def adaptive_no_ratio(bm: list[Pair], vec: list[Pair], bg: Any) -> list[str]:
    cb = chance_z(1 + min(len(bm), 50) / 10)
    cv = chance_z(max(bg[2], len(vec)) / 50)
    s: dict[str, float] = {}
    for t, x in tail_z_pad(bm, 10, 50).items():
        s[t] = s.get(t, 0.0) + max(0.0, x - cb)
    for t, x in tail_z_pad(vec, 10, 50).items():
        s[t] = s.get(t, 0.0) + max(0.0, x - cv)
    return order(s)


def bg_vec(vec: list[Pair], bg: tuple[float, float, int]) -> dict[str, float]:
    mu, sd = bg[0], bg[1]
    return {t: (x - mu) / max(sd, 1e-6) for t, x in vec}


def conf_rrf(bm: list[Pair], vec: list[Pair], bg: Any, k: float = 60.0, how: str = "gap") -> list[str]:
    """RRF with each list weighted by how far its head stands above its tail."""
    def gap(lst: list[Pair]) -> float:
        if len(lst) < 2:
            return 0.0
        a = np.array([x for _, x in lst], dtype=np.float64)
        top = a[:1].mean()
        tail = a[10:50] if len(a) > 12 else a[-3:]
        sd = a.std() if a.std() > 0 else 1.0
        return max(0.0, (top - tail.mean()) / sd)
    cb, cv = gap(bm), gap(vec)
    if cb + cv == 0:
        return rrf(bm, vec, 1, 1, k)
    return rrf(bm, vec, cb / (cb + cv), cv / (cb + cv), k)


def agree_rrf(bm: list[Pair], vec: list[Pair], bg: Any, k: float = 60.0, n: int = 10) -> list[str]:
    return rrf(bm, vec, 1.0, 1.0, k)


def calibrated(bm: list[Pair], vec: list[Pair], bg: Any, lo: int = 10, hi: int = 50, cap: float = 0.0) -> list[str]:
    """Each list's hits as z-scores against its own tail; a list whose head does not
    stand out of its tail (max z small) is scaled down."""
    zb, zv = tail_z(bm, lo, hi), tail_z(vec, lo, hi)
    s: dict[str, float] = {}
    for t, x in zb.items():
        s[t] = s.get(t, 0.0) + x
    for t, x in zv.items():
        s[t] = s.get(t, 0.0) + x
    return order(s)


def _add(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
    out = dict(a)
    for t, x in b.items():
        out[t] = out.get(t, 0.0) + x
    return out


def _stop_words() -> set[str]:
    """The engine's QUERY_STOP_WORDS, read from core/src/search/index/query.rs (one list, no copy)."""
    import re

    src = (HERE.parent.parent / "core" / "src" / "search" / "index" / "query.rs").read_text(encoding="utf-8")
    block = src.split("pub const QUERY_STOP_WORDS", 1)[1].split("];", 1)[0]
    block = "\n".join(line.split("//", 1)[0] for line in block.splitlines())
    return set(re.findall(r'"([a-z]+)"', block))


STOP = _stop_words()


def content_text(text: str) -> str:
    """The question's content words only (the engine's stop words dropped), "" when none."""
    import re

    return " ".join(w for w in re.findall(r"\w+", text) if w.lower() not in STOP)


def content_list(st: Any, q: dict[str, Any], full: list[Pair]) -> list[Pair]:
    """The BM25 list of the question's content words (what a search for them alone
    returns); the full list when the question has no content word."""
    t = content_text(q["text"])
    if not t:
        return full
    hits = st.ns[q["ns"]].episodic.search(t, limit=lists.DEPTH)
    return [(st.ep2doc[h.episode.id], h.score) for h in hits if h.score > 0]


def content_only(full: list[Pair], content: list[Pair]) -> list[Pair]:
    """The full BM25 list (its scores and order) restricted to the memories that
    matched a content word: what the engine can do without a second search."""
    keep = {t for t, _ in content}
    return [(t, x) for t, x in full if t in keep]


def zfuse(bm: list[Pair], vec: list[Pair], n_vec: int, ratio: float = 1.0, allowance: bool = True,
          wb: float = 0.5, wv: float = 0.5, bm25_allowance: bool = True) -> list[str]:
    """adaptive with the ratio step raised to the power `ratio` (1 = the current default)."""
    zb = tail_z_pad(bm, 10, 50)
    zv = tail_z_pad(vec, 10, 50)
    cb = chance_z(1 + min(len(bm), 50) / 10) if allowance and bm25_allowance else 0.0
    cv = chance_z(max(n_vec, len(vec)) / 50) if allowance else 0.0
    zb = {t: max(0.0, x - cb) for t, x in zb.items()}
    zv = {t: max(0.0, x - cv) for t, x in zv.items()}
    mb, mv = max(zb.values(), default=0.0), max(zv.values(), default=0.0)
    if mb >= mv and mb > 0:
        wv *= (mv / mb) ** ratio
    elif mv > mb:
        wb *= (mb / mv) ** ratio
    s: dict[str, float] = {}
    for t, x in zb.items():
        s[t] = s.get(t, 0.0) + wb * x
    for t, x in zv.items():
        s[t] = s.get(t, 0.0) + wv * x
    return order(s)


def anchored(fused: list[str], bm: list[Pair], vec: list[Pair], k: int = 3) -> list[str]:
    """The fused top 10, made to hold each list's top k (the rest of the fused order fills it)."""
    must = list(dict.fromkeys([t for t, _ in bm[:k]] + [t for t, _ in vec[:k]]))
    chosen = set(must) | set([t for t in fused if t not in must][: max(0, 10 - len(must))])
    return [t for t in fused if t in chosen][:10] + [t for t in must if t not in fused]


def zlinear(bm: list[Pair], vec: list[Pair], w: float) -> list[str]:
    """Fixed weights on tail-z (no allowance, no ratio): BM25 × (1 − w), vectors × w. The
    third round's per-set oracle: which fixed weight each set would need."""
    s: dict[str, float] = {}
    for t, x in tail_z_pad(bm, 10, 50).items():
        s[t] = s.get(t, 0.0) + (1.0 - w) * x
    for t, x in tail_z_pad(vec, 10, 50).items():
        s[t] = s.get(t, 0.0) + w * x
    return order(s)


def content_gate(bm: list[Pair], vec: list[Pair], content: list[Pair], lo: float, hi: float) -> list[str]:
    """zlinear with a per-query weight: `lo` on the vectors when BM25's best hit matched a
    content word of the question (it is in the content-word list), `hi` when it did not."""
    matched = bool(bm) and bm[0][0] in {t for t, _ in content}
    return zlinear(bm, vec, lo if matched else hi)


def keep_places(fused: list[str], bm: list[Pair], vec: list[Pair], w: float, limit: int = 10) -> list[str]:
    """The engine's guard for the stronger list (weight 1 − w for BM25, w for the vectors):
    its top `limit − round(limit · weaker share)` stay in the top `limit`, the other places
    go to the best of the rest by fused order (a memory the weaker list found with the same
    score as one already placed there, and the same score or absence in the stronger list,
    is a copy and takes no place); the top `limit` keep the fused order."""
    strong_full, weak_full = (vec, bm) if w > 1 - w else (bm, vec)
    z = tail_z_pad(strong_full, 10, 50)
    strong = [(t, x) for t, x in strong_full if z.get(t, 0.0) > 0]  # only hits above its background
    room = int(np.floor(limit * min(w, 1 - w) + 0.5))
    kept = {t for t, _ in strong[: limit - room]}
    s_score, w_score = dict(strong_full), dict(weak_full)
    placed: set[tuple[float, float | None]] = set()
    others = limit - len(kept)
    top: list[str] = []
    for t in fused:
        if t in kept:
            top.append(t)
        elif others > 0:
            if t in w_score:
                sig = (w_score[t], s_score.get(t))
                if sig in placed:
                    continue
                placed.add(sig)
            others -= 1
            top.append(t)
    chosen = set(top)
    return top + [t for t in fused if t not in chosen]


POWER = 2.0  # core/src/search/fusion.rs ADAPTIVE_SHARE_POWER


class Evidence:
    """The engine's default since the third round (core/src/search/evidence.rs,
    FusionMethod::Adaptive): tail-z of each list (no allowance, no ratio), the
    vector list weighted s^POWER and BM25 1 − s^POWER, BM25's z added only for
    the hits that matched a content word (`content`, the full list restricted to
    them; the background stays the whole list's), the stronger list keeping its
    places (`keep_places`), s = (agreed + 1) / (confident + 2)
    over the earlier questions of the run whose BM25 best hit held more than
    half of the question's content words (confident), agreed when the vector
    list's best hit was the same memory. Harness-side, words are matched
    unstemmed (the engine stems them)."""

    def __init__(self, texts: dict[str, str]):
        self.texts = texts
        self.confident = 0
        self.agreed = 0

    @staticmethod
    def words(text: str) -> set[str]:
        import re

        return {w for w in re.findall(r"\w+", text.lower()) if w not in STOP}

    def __call__(self, q: dict[str, Any], bm: list[Pair], vec: list[Pair],
                 content: list[Pair] | None = None) -> list[str]:
        share = (self.agreed + 1) / (self.confident + 2)
        w = share ** POWER
        s: dict[str, float] = {}
        matched = None if content is None else {t for t, _ in content}
        for t, x in tail_z_pad(bm, 10, 50).items():
            if matched is None or t in matched:
                s[t] = s.get(t, 0.0) + (1.0 - w) * x
        for t, x in tail_z_pad(vec, 10, 50).items():
            s[t] = s.get(t, 0.0) + w * x
        fused = order(s)
        fused += [t for t, _ in bm if t not in s]
        ranked = keep_places(fused, bm, vec, w)
        asked = self.words(q["text"])
        if bm and vec and asked:
            held = self.words(self.texts[bm[0][0]])
            if 2 * len(asked & held) > len(asked):
                self.confident += 1
                self.agreed += bm[0][0] == vec[0][0]
        return ranked


def score(ranked: list[str], gold: list[str]) -> tuple[float, float]:
    g = set(gold)
    r10 = len(g.intersection(ranked[:10])) / len(g)
    rr = next((1.0 / i for i, t in enumerate(ranked[:10], 1) if t in g), 0.0)
    return r10, rr


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sets", default="convmem,friendsqa,molweni,friendsqa-mini,molweni-mini")
    ap.add_argument("--models", default="minilm,e5")
    ap.add_argument("--only", default="", help="comma-separated substrings: candidates to compute (default all)")
    ap.add_argument("--out")
    args = ap.parse_args()
    target = Path(os.environ.get("CARGO_TARGET_DIR", HERE.parent.parent / "target"))
    old: dict[str, Callable[..., list[str]]] = {
        "adaptive until the third round (allowance + ratio)": adaptive,
        "rrf k60": lambda b, v, g: rrf(b, v),
        "rrf k10": lambda b, v, g: rrf(b, v, k=10),
        "rrf k30": lambda b, v, g: rrf(b, v, k=30),
        "old adaptive": old_adaptive,
        "tail-z sum (10..50)": zsum,
        "tail-z sum (20..50)": lambda b, v, g: zsum(b, v, g, 20, 50),
        "tail-z sum (5..50)": lambda b, v, g: zsum(b, v, g, 5, 50),
        "tail-z pad sum (10..50)": zsum_pad,
        "tail-z pad sum (20..50)": lambda b, v, g: zsum_pad(b, v, g, 20, 50),
        "tail-z pad + chance allowance, no ratio": lambda b, v, g: adaptive_no_ratio(b, v, g),
        "tail-z pad, BM25 ×1, vectors ×0.8": lambda b, v, g: zsum_pad(b, v, g, 10, 50, 1.25),
        "bg-z vec + tail-z pad bm": lambda b, v, g: order(_add(tail_z_pad(b, 10, 50), {t: max(0.0, x) for t, x in bg_vec(v, g).items()})),
        "gap-weighted rrf k60": conf_rrf,
        "gap-weighted rrf k20": lambda b, v, g: conf_rrf(b, v, g, 20),
    }
    # Every candidate gets (BM25 list, vector list, background, content-word BM25 list,
    # full list restricted to content matches).
    cands: dict[str, Callable[..., list[str]]] = {k: (lambda f: lambda b, v, g, bc, bo: f(b, v, g))(f)
                                                  for k, f in old.items()}
    cands.update({
        "adaptive, content-word list": lambda b, v, g, bc, bo: adaptive(bc, v, g),
        "adaptive, content-only filter": lambda b, v, g, bc, bo: adaptive(bo, v, g),
        "rrf k60, content-word list": lambda b, v, g, bc, bo: rrf(bc, v),
        "rrf k60, content-only filter": lambda b, v, g, bc, bo: rrf(bo, v),
        "adaptive ratio^2": lambda b, v, g, bc, bo: zfuse(b, v, g[2], 2.0),
        "adaptive ratio^2, content-only filter": lambda b, v, g, bc, bo: zfuse(bo, v, g[2], 2.0),
        "tail-z + allowance, content-only filter": lambda b, v, g, bc, bo: zfuse(bo, v, g[2], 0.0),
        "tail-z, content-only filter": lambda b, v, g, bc, bo: zfuse(bo, v, g[2], 0.0, False),
        "adaptive, no BM25 allowance, content-only filter": lambda b, v, g, bc, bo: zfuse(
            bo, v, g[2], 1.0, bm25_allowance=False),
        **{f"tail-z linear, vectors ×{w}": (lambda w: lambda b, v, g, bc, bo: zlinear(b, v, w))(w)
           for w in (0.1, 0.2, 0.3, 0.5, 0.7, 0.8)},
        "content gate, vectors ×0.2 / ×0.8": lambda b, v, g, bc, bo: content_gate(b, v, bc, 0.2, 0.8),
        "adaptive + each list's top 3 kept": lambda b, v, g, bc, bo: anchored(adaptive(b, v, g), b, v, 3),
    })
    if args.only:
        keys = args.only.split(",")
        cands = {k: f for k, f in cands.items() if any(x in k for x in keys)}
    names = ["**default (evidence)**", *cands]
    out = ["| set | model | BM25 | vectors | max | " + " | ".join(names) + " |",
           "|---|---|---:|---:|---:|" + "---:|" * len(names)]
    for sname in args.sets.split(","):
        try:
            data = evalsets.load(sname)
        except evalsets.Absent as e:
            print(e)
            continue
        for m in args.models.split(","):
            emb = embed.Embedder(cache_dir=target / "bench" / "embcache", model=m)
            dv = emb.embed_array([d["text"] for d in data["docs"]])
            qv = emb.embed_array([q["text"] for q in data["questions"]], query=True)
            st = lists.Store(data, dv)
            res: dict[str, list[float]] = {k: [] for k in ["BM25", "vectors", *names]}
            evidence = Evidence({d["id"]: " ".join([d["text"], *(d.get("speakers") or [])]) for d in data["docs"]})
            for i, q in enumerate(data["questions"]):
                b = st.bm25(q)
                v = st.cosine(q, qv[i])
                g = st.background(q, qv[i])
                bc = content_list(st, q, b)
                bo = content_only(b, bc)
                res["BM25"].append(score([t for t, _ in b], q["gold"])[0])
                res["vectors"].append(score([t for t, _ in v], q["gold"])[0])
                res["**default (evidence)**"].append(score(evidence(q, b, v, bo), q["gold"])[0])
                for name, f in cands.items():
                    res[name].append(score(f(b, v, g, bc, bo), q["gold"])[0])
            st.close()
            mean = {k: float(np.mean(x)) for k, x in res.items()}
            best = max(mean["BM25"], mean["vectors"])
            row = f"| {sname} | {m} | {mean['BM25']:.3f} | {mean['vectors']:.3f} | {best:.3f} | " + " | ".join(
                f"{mean[c]:.3f}" + ("" if mean[c] >= best else " ✗") for c in names) + " |"
            print(row, flush=True)
            out.append(row)
    text = "\n".join(out) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
