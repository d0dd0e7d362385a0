"""The workload whose code is laid out together (layout/README.md).

Run under callgrind by layout/generate.sh, once per phase:

    python layout/workload.py ingest N   what the footprint benchmark measures: import,
                                         open, N one-call records and N/1,000 batches of
                                         1,000, searches, close, reopen, search, close;
                                         default options, then the low-memory preset
    python layout/workload.py tour       one call of most of the rest of the API

The `ingest` phase's functions go first in the order file, then the `tour`'s, so
that the code an ingest runs is as close together as it can be.
"""

from __future__ import annotations

import os
import random
import sys
import tempfile
from pathlib import Path

import memstrata

# The footprint benchmark's episodes: the texts profiled are the texts it measures.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benches" / "footprint"))
from probe import WORDS, text  # noqa: E402


def searches(mem: memstrata.Memory, n: int) -> None:
    rng = random.Random(n)
    for _ in range(n):
        mem.episodic.search(" ".join(rng.sample(WORDS, 2)), limit=10)


def ingest(n: int) -> None:
    for opts in ({}, {"low_memory": True}):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "store")
            mem = memstrata.Memory(path, **opts)
            for i in range(n):
                mem.episodic.record(text(i))
            for start in range(n, 2 * n, 1000):
                mem.episodic.record_many([{"summary": text(i)} for i in range(start, start + 1000)])
            searches(mem, 50)
            mem.close()
            mem = memstrata.Memory(path, **opts)
            searches(mem, 50)
            mem.close()


def tour() -> None:
    with tempfile.TemporaryDirectory() as d:
        mem = memstrata.Memory(os.path.join(d, "store"))
        st = mem.short_term
        st.store("k", {"a": 1}, ttl=60)
        st.retrieve("k")
        st.entry("k")
        st.keys("")
        st.forget("k")
        wk = mem.working
        wk.focus("task")
        wk.current_focus()
        wk.add_to_workspace({"note": "x"})
        wk.workspace_items()
        wk.clear()
        ep = mem.episodic
        ids = [ep.record(text(i), tags=["t"], importance=3) for i in range(20)]
        ep.record_detailed(text(99), on_duplicate="skip")
        ep.get(ids[0])
        ep.recent(limit=5)
        ep.summarize(ids[:3])
        ep.forget(ids[1])
        sem = mem.semantic
        sem.store("fact", {"v": 1})
        sem.retrieve("fact")
        sem.query("fact")
        sid = mem.session_create("s").session_id
        mem.session_save(sid, {"state": 1})
        mem.session_restore(sid)
        mem.session_list()
        mem.context_store("ctx", {"v": 1})
        mem.context_retrieve("ctx")
        mem.switch_context("other")
        mem.contexts()
        t = mem.punch_in("model-a", "write the report")
        mem.punch_out(t.task_id, "done")
        mem.timesheet_report()
        mem.status(include_metrics=True)
        mem.optimize()
        mem.export(os.path.join(d, "export.jsonl"))
        mem.close()


if __name__ == "__main__":
    if sys.argv[1] == "ingest":
        ingest(int(sys.argv[2]))
    else:
        tour()
