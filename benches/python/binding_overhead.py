"""Python binding per-call overhead vs Rust, on the same data, same calls, same order.

Run by scripts/bench.sh:
    PYTHONPATH=<release wheel dir> python binding_overhead.py COMPARE_BIN DATA.json OUT.md [ROUNDS]

Each round runs the Rust baseline (`compare binding-baseline DATA.json`, a fresh
process and store) and then the same sequence through `import memstrata` (a
fresh store); the reported figure per operation is the median over rounds of
each side's median time per call over batches. No assertion on time.
"""

from __future__ import annotations

import datetime as dt
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import memstrata


def per_call(n: int, batch: int, f: Callable[[int], Any]) -> float:
    """Median ns per call over batches of `batch`."""
    meds = []
    i = 0
    clock = time.perf_counter_ns
    while i < n:
        end = min(i + batch, n)
        t = clock()
        for j in range(i, end):
            f(j)
        meds.append((clock() - t) / (end - i))
        i = end
    return statistics.median(meds)


def python_round(data: dict[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as d, memstrata.Memory(Path(d) / "store", durability="periodic") as mem:
        st = mem.short_term
        kv = data["kv"]
        lookups = data["lookups"]
        store, retrieve = st.store, st.retrieve
        out["short_term.store"] = per_call(len(kv), 500, lambda i: store(kv[i][0], kv[i][1]))

        def hit(i: int) -> None:
            if retrieve(lookups[i]) is None:
                raise RuntimeError("missing key")

        out["short_term.retrieve (hit)"] = per_call(len(lookups), 1000, hit)
        misses = [f"missing:{i:08}" for i in range(len(lookups))]
        out["short_term.retrieve (miss)"] = per_call(len(misses), 1000, lambda i: retrieve(misses[i]))
        out["active_context"] = per_call(20_000, 1000, lambda i: mem.active_context)
        ep = mem.episodic
        for e in data["episodes"]:
            ep.record(
                e["summary"],
                content=e["content"],
                participants=e["participants"],
                tags=e["tags"],
                importance=e["importance"],
                timestamp=dt.datetime.fromtimestamp(e["timestamp_ms"] / 1000, tz=dt.timezone.utc),
            )
        # One index segment on both sides: the segment layout otherwise depends on commit timing.
        mem.optimize("aggressive")
        queries = data["queries"]
        for q in queries[:20]:
            ep.search(q, limit=10)
        out["episodic.search (10 hits)"] = per_call(len(queries), 50, lambda i: ep.search(queries[i], limit=10))
    return out


def fmt_ns(ns: float) -> str:
    if ns < 1_000:
        return f"{ns:.0f} ns"
    if ns < 1_000_000:
        return f"{ns / 1e3:.1f} µs"
    return f"{ns / 1e6:.2f} ms"


def main() -> None:
    compare, data_path, out_path = sys.argv[1], sys.argv[2], sys.argv[3]
    rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    data = json.loads(Path(data_path).read_text())
    rust: dict[str, list[float]] = {}
    py: dict[str, list[float]] = {}
    for r in range(rounds):
        # Alternate which side goes first, so drift on a shared machine hits both.
        sides = ["rust", "python"] if r % 2 == 0 else ["python", "rust"]
        for side in sides:
            if side == "rust":
                base = json.loads(subprocess.check_output([compare, "binding-baseline", data_path]))
                for k, v in base.items():
                    rust.setdefault(k, []).append(v)
            else:
                for k, v in python_round(data).items():
                    py.setdefault(k, []).append(v)
        print(f"   binding overhead: round {r + 1}/{rounds} done", file=sys.stderr)
    lines = [
        "## Python binding: per-call overhead vs Rust\n",
        f"The same calls on the same data in the same order ({len(data['kv'])} `store`s, "
        f"{len(data['lookups'])} `retrieve`s of random existing keys and as many of absent keys, "
        f"{len(data['queries'])} searches over {len(data['episodes'])} episodes), from Rust and through "
        f"`import memstrata` (release wheel, Python {sys.version.split()[0]}, every call releases the GIL); "
        f"median time per call over batches, median of {rounds} alternating rounds, each on a fresh store. "
        "*overhead* is Python minus Rust: argument conversion (dict → JSON value), the GIL release and "
        "re-acquire, and building the Python result. On calls dominated by storage or search work "
        "(`store`, `search`) the overhead is smaller than the run-to-run noise of those calls "
        "(a negative figure means exactly that); the cheap calls show it best.\n",
        "| call | Rust | Python | overhead per call | Python / Rust |",
        "|---|---|---|---|---|",
    ]
    for k in rust:
        r = statistics.median(rust[k])
        p = statistics.median(py[k])
        lines.append(f"| `{k}` | {fmt_ns(r)} | {fmt_ns(p)} | {fmt_ns(p - r)} | {p / r:.2f}× |")
    Path(out_path).write_text("\n".join(lines) + "\n\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
