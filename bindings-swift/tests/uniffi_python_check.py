"""A second, cheaper check of libmemstrata_ffi: uniffi's own Python bindings,
generated from the same library, run a few of the Kotlin suite's scenarios.

Run by scripts/test-kotlin.sh after the JUnit suite:
    python3 uniffi_python_check.py <dir>
where <dir>/uniffi_memstrata/ is a package holding memstrata.py and
memstrata_common.py (the generated modules import each other relatively) and
the library.
It prints one closing line `uniffi-python: N passed, N failed`.
"""

import asyncio
import datetime
import json
import sys
import tempfile
import traceback

sys.path.insert(0, sys.argv[1])

from uniffi_memstrata import memstrata as ms  # noqa: E402  (uniffi's module, not the pyo3 package)
from uniffi_memstrata import memstrata_common as msc  # noqa: E402

T0 = datetime.datetime(2031, 6, 1, 10, 0, tzinfo=datetime.timezone.utc)


async def short_term_ttl_with_manual_clock():
    clock = ms.ManualClock(T0)
    mem = ms.Memory(None, None, clock)
    entry = await mem.get_short_term().store("k", '{"b":1,"a":2}', 60.0)
    assert entry.value == '{"a":2,"b":1}', entry
    assert entry.expires_at == T0 + datetime.timedelta(seconds=60), entry
    clock.advance(61.0)
    assert await mem.get_short_term().retrieve("k") is None
    await mem.close()


async def errors_by_kind_and_panics():
    mem = ms.Memory(None, None, None)
    try:
        await mem.get_semantic().update("nope", "{}")
        raise AssertionError("expected NotFound")
    except ms.MemstrataError.NotFound as e:
        assert "nope" in str(e), e
    try:
        await mem.get_short_term().store("", "1", None)
        raise AssertionError("expected InvalidInput")
    except ms.MemstrataError.InvalidInput as e:
        assert "`key`" in str(e), e
    try:
        await ms.panic_for_tests()
        raise AssertionError("expected Internal")
    except ms.MemstrataError.Internal as e:
        assert "deliberate panic" in str(e), e
    await mem.get_short_term().store("after", "1", None)
    await mem.close()
    try:
        await mem.status(True, False)
        raise AssertionError("expected Closed")
    except ms.MemstrataError.Closed:
        pass


class Doubler(ms.ActionHandler):
    def actions(self):
        return ["double"]

    def call(self, action, parameters):
        return json.dumps(json.loads(parameters)["n"] * 2)


async def host_action_pause_resume():
    mem = ms.Memory(None, None, None)
    proc = mem.get_procedural()
    steps = [
        {"id": "a", "action": "double", "parameters": {"n": "{{ params.n }}"}, "next": "b"},
        {"id": "b", "action": "ask_human"},
    ]
    await proc.learn("flow", json.dumps(steps))
    run = await proc.execute("flow", '{"n": 21}', Doubler())
    assert run.status == "awaiting_action", run
    assert json.loads(run.outputs)["a"] == 42, run.outputs
    assert run.pending.action == "ask_human", run.pending
    done = await proc.resume(run.run_id, '"yes"', None)
    assert done.status == "completed", done
    await mem.close()


async def concurrent_calls_and_a_shared_engine():
    with tempfile.TemporaryDirectory() as d:
        a = ms.Memory(d + "/s.mem", msc.OpenOptions(durability="immediate"), None)
        b = ms.Memory(d + "/s.mem", None, None)
        await asyncio.gather(*(a.get_semantic().store(f"k{i}", str(i)) for i in range(50)))
        assert len(await b.get_semantic().keys("k")) == 50
        await a.close()
        await b.close()


SCENARIOS = [
    short_term_ttl_with_manual_clock,
    errors_by_kind_and_panics,
    host_action_pause_resume,
    concurrent_calls_and_a_shared_engine,
]


def main():
    passed = failed = 0
    for scenario in SCENARIOS:
        try:
            asyncio.run(scenario())
            passed += 1
        except Exception:
            failed += 1
            print(f"uniffi-python: {scenario.__name__} FAILED", file=sys.stderr)
            traceback.print_exc()
    print(f"uniffi-python: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
