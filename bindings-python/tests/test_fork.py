"""Fork safety: a Memory carried across fork() raises ForkedError at once.

The child (os.fork(), or multiprocessing with the fork start method) makes a
write, a read, a search, a flush and a close on the Memory its parent opened,
then tries to open a store itself, and reports each outcome with its duration
through a pipe / queue. The parent bounds its wait with a generous timeout
only so that a hang fails the test instead of stalling CI; afterwards the
parent's store holds exactly the parent's writes and reopens cleanly.
"""

import multiprocessing
import os
import pickle
import select
import time

import pytest

import memstrata

DURABILITIES = ["immediate", "periodic", "manual"]
# Generous: only there so that a hung child fails the test instead of CI.
CHILD_TIMEOUT_S = 120
CALLS = ["write", "read", "search", "flush", "close", "open again", "open another"]

# CPython 3.12+ warns that fork() in a multi-threaded process may deadlock the
# child: the very situation under test (the engine runs background threads).
pytestmark = pytest.mark.filterwarnings("ignore:.*multi-threaded.*fork:DeprecationWarning")


def child_calls(mem, path):
    """Each call in the child: (outcome, seconds). Runs in the forked child."""
    calls = [
        ("write", lambda: mem.short_term.store("child", {"from": "child"})),
        ("read", lambda: mem.short_term.retrieve("parent")),
        ("search", lambda: mem.episodic.search("parent")),
        ("flush", mem.flush),
        ("close", mem.close),
        ("open again", lambda: memstrata.Memory(path)),
        ("open another", lambda: memstrata.Memory()),
    ]
    results = {}
    for name, call in calls:
        started = time.monotonic()
        try:
            call()
            outcome = "no error"
        except memstrata.ForkedError as e:
            outcome = f"ForkedError {e.code}: {e}"
        except BaseException as e:  # report anything else to the parent
            outcome = f"{type(e).__name__}: {e}"
        results[name] = (outcome, time.monotonic() - started)
    results["closed"] = (str(mem.closed), 0.0)
    return results


def open_parent_store(path, durability):
    mem = memstrata.Memory(path, durability=durability)
    mem.short_term.store("parent", "p")
    mem.episodic.record("parent episode about the deploy")
    return mem


def check_child_results(results, durability):
    assert results is not None, f"{durability}: the child hung (no result in {CHILD_TIMEOUT_S} s)"
    for name in CALLS:
        outcome, seconds = results[name]
        assert outcome.startswith("ForkedError FORKED"), f"{durability}: {name} gave {outcome}"
        assert "fork()" in outcome and "PostgreSQL" in outcome and "memstrata-mcp" in outcome
        # Not a timing assertion: "did not hang" (a hang would last forever).
        assert seconds < CHILD_TIMEOUT_S, f"{durability}: {name} took {seconds:.1f} s"
    # close() in the child released the child's handle (and nothing of the parent's).
    assert results["closed"][0] == "True"
    opened_in = results["write"][0].split("opened in process ")[1].split(",")[0]
    assert opened_in == str(os.getpid())


def check_parent_store(mem, path, durability):
    # The parent goes on, and its store holds exactly its own writes.
    mem.short_term.store("parent2", "p2")
    assert mem.short_term.keys() == ["parent", "parent2"]
    hits = mem.episodic.search("deploy")
    assert [h.episode.summary for h in hits] == ["parent episode about the deploy"]
    mem.flush()
    mem.close()
    with memstrata.Memory(path, durability=durability) as again:
        assert again.short_term.keys() == ["parent", "parent2"]
        assert again.short_term.retrieve("child") is None
        assert len(again.episodic.recent(10)) == 1


@pytest.mark.parametrize("durability", DURABILITIES)
def test_os_fork_child_gets_forked_error(tmp_path, durability):
    path = tmp_path / "store"
    mem = open_parent_store(path, durability)
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        try:
            os.close(read_fd)
            os.write(write_fd, pickle.dumps(child_calls(mem, path)))
        finally:
            os._exit(0)
    os.close(write_fd)
    data = b""
    deadline = time.monotonic() + CHILD_TIMEOUT_S
    while True:
        left = deadline - time.monotonic()
        ready, _, _ = select.select([read_fd], [], [], max(left, 0))
        if not ready:
            break
        chunk = os.read(read_fd, 65536)
        if not chunk:
            break
        data += chunk
    os.close(read_fd)
    if not ready:
        os.kill(pid, 9)
    os.waitpid(pid, 0)
    check_child_results(pickle.loads(data) if data else None, durability)
    check_parent_store(mem, path, durability)


def mp_child(mem, path, queue):
    queue.put(child_calls(mem, path))


@pytest.mark.parametrize("durability", DURABILITIES)
def test_multiprocessing_fork_child_gets_forked_error(tmp_path, durability):
    path = tmp_path / "store"
    mem = open_parent_store(path, durability)
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    # With the fork start method the Memory is inherited, not pickled.
    proc = ctx.Process(target=mp_child, args=(mem, path, queue))
    proc.start()
    try:
        results = queue.get(timeout=CHILD_TIMEOUT_S)
    except Exception:
        results = None
    proc.join(CHILD_TIMEOUT_S)
    if proc.is_alive():
        proc.kill()
        proc.join()
    check_child_results(results, durability)
    assert proc.exitcode == 0
    check_parent_store(mem, path, durability)


def test_forked_error_is_exported_and_documented():
    assert issubclass(memstrata.ForkedError, memstrata.MemstrataError)
    assert memstrata.ForkedError.code == "FORKED"
    assert "ForkedError" in memstrata.__all__
    assert "fork()" in memstrata.ForkedError.__doc__
