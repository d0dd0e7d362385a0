"""One Memory shared by many threads: every call releases the GIL and nothing is lost."""

import json
import os
import subprocess
import sys
import threading

import pytest

import memstrata

THREADS = 8
ROUNDS = 25


def test_hammer_one_memory_from_eight_threads(store_path):
    mem = memstrata.Memory(store_path)
    errors: list[BaseException] = []
    episode_ids: dict[int, list[str]] = {t: [] for t in range(THREADS)}
    workspace_ids: dict[int, list[str]] = {t: [] for t in range(THREADS)}
    barrier = threading.Barrier(THREADS)

    def worker(t: int) -> None:
        try:
            barrier.wait()
            for i in range(ROUNDS):
                mem.short_term.store(f"t{t}:k{i}", {"t": t, "i": i})
                episode_ids[t].append(
                    mem.episodic.record(f"thread{t} round{i} event", tags=[f"t{t}"], content={"i": i})
                )
                mem.semantic.store(f"t{t}:fact{i}", {"i": i})
                if i % 2:
                    mem.semantic.update(f"t{t}:fact{i}", {"odd": True})
                workspace_ids[t].append(mem.namespace(f"ctx{t}").working.add_to_workspace(i))
                # Reads interleaved with the writes of the other threads.
                assert mem.short_term.retrieve(f"t{t}:k{i}") == {"t": t, "i": i}
                mem.episodic.search(f"thread{t}", limit=5, tags=[f"t{t}"])
                mem.semantic.query("fact", limit=3)
                mem.short_term.keys(f"t{t}:")
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []

    for t in range(THREADS):
        assert len(mem.short_term.keys(f"t{t}:")) == ROUNDS
        for i in range(ROUNDS):
            assert mem.short_term.retrieve(f"t{t}:k{i}") == {"t": t, "i": i}
            expected = {"i": i, "odd": True} if i % 2 else {"i": i}
            assert mem.semantic.retrieve(f"t{t}:fact{i}") == expected
        assert len(set(episode_ids[t])) == ROUNDS
        for eid in episode_ids[t]:
            assert mem.episodic.get(eid) is not None
        hits = mem.episodic.search(f"thread{t}", limit=1000, tags=[f"t{t}"])
        assert sorted(h.episode.id for h in hits) == sorted(episode_ids[t])
        items = mem.namespace(f"ctx{t}").working.workspace_items()
        assert [it.id for it in items] == workspace_ids[t][-len(items):]
        assert len(items) == min(ROUNDS, 64)

    # Nothing lost across a reopen either.
    mem.close()
    with memstrata.Memory(store_path) as again:
        assert sum(len(again.short_term.keys(f"t{t}:")) for t in range(THREADS)) == THREADS * ROUNDS
        assert len(again.semantic.keys()) == THREADS * ROUNDS


GIL_PROBE = r"""
import json, os, sys, threading
import memstrata

tmp = sys.argv[1]
fifo = os.path.join(tmp, "pipe")
os.mkfifo(fifo)
mem = memstrata.Memory(os.path.join(tmp, "store"))
mem.semantic.store("k", {"v": 1})
result = {}

# export() blocks opening the FIFO until a reader appears. The reader is this
# (main) Python thread: it can only run if export() released the GIL.
t = threading.Thread(target=lambda: result.setdefault("export", mem.export(fifo).records))
t.start()
with open(fifo, encoding="utf-8") as f:
    lines = f.read().splitlines()
t.join()

# Same for import_(): it blocks until this thread opens the FIFO for writing.
other = memstrata.Memory(os.path.join(tmp, "other"))
t = threading.Thread(target=lambda: result.setdefault("import", other.import_(fifo).records))
t.start()
with open(fifo, "w", encoding="utf-8") as f:
    f.write("\n".join(lines) + "\n")
t.join()
print(json.dumps({"lines": len(lines), **result, "value": other.semantic.retrieve("k")}))
"""


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs POSIX FIFOs")
def test_blocking_calls_release_the_gil(tmp_path):
    """A core call blocked on I/O lets other Python threads run (else this would deadlock)."""
    out = subprocess.run(
        [sys.executable, "-c", GIL_PROBE, str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["export"] == got["import"] == got["lines"] - 1
    assert got["value"] == {"v": 1}


def test_close_while_other_threads_use_the_memory(store_path):
    mem = memstrata.Memory(store_path)
    outcomes: list[str] = []
    lock = threading.Lock()
    started = threading.Barrier(5)

    def user(t: int) -> None:
        started.wait()
        for i in range(200):
            try:
                mem.short_term.store(f"{t}:{i}", i)
            except memstrata.MemstrataError as e:
                with lock:
                    outcomes.append(e.code)
                return
        with lock:
            outcomes.append("done")

    threads = [threading.Thread(target=user, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    started.wait()
    mem.close()
    for th in threads:
        th.join()
    assert len(outcomes) == 4
    assert set(outcomes) <= {"done", "CLOSED"}
    with memstrata.Memory(store_path) as again:
        for t in range(4):
            keys = again.short_term.keys(f"{t}:")
            # Every acknowledged store survived the close.
            assert all(again.short_term.retrieve(k) == int(k.split(":")[1]) for k in keys)
