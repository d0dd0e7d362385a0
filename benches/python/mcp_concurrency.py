"""Concurrent writers through MCP: what memstrata-mcp and the reference
`@modelcontextprotocol/server-memory` (npm) each keep, and what they lose.

Run by scripts/bench.sh (after mcp_latency.py, whose raw JSON-RPC client, mcpbench/clients.py, it reuses):
    PYTHONPATH=<pylib> .venv/bin/python mcp_concurrency.py \
        MEMSTRATA_MCP_BIN REFERENCE_INDEX_JS DATA.json OUT.md

WRITERS concurrent writers each make K writes; every write is two calls: store a
distinct fact (memstrata `knowledge_store`, reference `create_entities`) and append
one item to ONE shared record created beforehand (memstrata `knowledge_update`
with an RFC 7386 merge patch adding one member, no read-modify-write in the
client; reference `add_observations` on one entity). Afterwards a fresh client
counts what is there. LOST = acknowledged (a success result came back) but not
found. A refused or failed call is an error, not a loss.

Scenarios:
  a. one server process, 50 concurrent sessions: memstrata over streamable HTTP
     (50 SDK `mcp.Client` sessions on one `memstrata-mcp http`), and for both
     servers 50 writers multiplexed on one stdio connection (raw JSON-RPC);
  b. 50 server processes on one store (50 agents each spawning the server):
     50 `node index.js` with the same MEMORY_FILE_PATH; 50 `memstrata-mcp stdio`
     on the same --store (all but one refuse with StoreLocked, by design).

Exit status: 0; 3 if memstrata-mcp lost an acknowledged write; 4 if a
memstrata-mcp scenario hung or failed (the table is written in both cases).
No assertions on time.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable

from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from mcpbench.clients import TIMEOUT, LogCount, RawStdio, RpcError, start_http
from mcpbench.workload import server_command

WRITERS = 50
K = 20
SCENARIO_TIMEOUT = 300  # seconds per scenario; a hang is reported, not waited on
COUNT_DEPTH = 16
SHARED = "shared-log"

# A tools/call that never raises: (success, error text or "").
Call = Callable[[str, dict[str, Any]], Awaitable[tuple[bool, str]]]


@dataclass
class Row:
    scenario: str
    server: str
    attempted: int = 0
    acked_facts: set[str] = field(default_factory=set)
    acked_items: set[str] = field(default_factory=set)
    errors: list[str] = field(default_factory=list)
    found_facts: set[str] = field(default_factory=set)
    found_items: set[str] = field(default_factory=set)
    after_restart: tuple[set[str], set[str]] | None = None
    note: str = ""
    failure: str = ""
    seconds: float = 0.0

    @property
    def acked(self) -> int:
        return len(self.acked_facts) + len(self.acked_items)

    @property
    def lost(self) -> int:
        """Acknowledged but not found; 0 for a row that did not finish (nothing was counted)."""
        if self.failure:
            return 0
        n = len(self.acked_facts - self.found_facts) + len(self.acked_items - self.found_items)
        if self.after_restart:
            f, i = self.after_restart
            n = max(n, len(self.acked_facts - f) + len(self.acked_items - i))
        return n


def fact_key(w: int, i: int) -> str:
    return f"w{w:02}-f{i:02}"


def item_key(w: int, i: int) -> str:
    return f"w{w:02}-i{i:02}"


TEXTS: list[str] = []


def text(w: int, i: int) -> str:
    return TEXTS[(w * K + i) % len(TEXTS)]


# ---- the two servers' tools ----------------------------------------------------------------------

def memstrata_calls(w: int, i: int) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        ("fact", "knowledge_store", {"key": fact_key(w, i), "knowledge": {"writer": w, "n": i, "text": text(w, i)}}),
        ("item", "knowledge_update", {"key": SHARED, "patch": {item_key(w, i): text(w, i)}}),
    ]


def reference_calls(w: int, i: int) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        ("fact", "create_entities", {"entities": [{"name": fact_key(w, i), "entityType": "fact",
                                                   "observations": [text(w, i)]}]}),
        ("item", "add_observations", {"observations": [{"entityName": SHARED,
                                                        "contents": [f"{item_key(w, i)}: {text(w, i)}"]}]}),
    ]


SETUP: dict[str, tuple[str, dict[str, Any]]] = {
    "memstrata": ("knowledge_store", {"key": SHARED, "knowledge": {}}),
    "reference": ("create_entities", {"entities": [{"name": SHARED, "entityType": "log", "observations": []}]}),
}


def raw_call(raw: RawStdio) -> Call:
    async def call(name: str, args: dict[str, Any]) -> tuple[bool, str]:
        try:
            r = await raw.call_tool(name, args)
        except (RpcError, asyncio.TimeoutError, OSError) as e:
            return False, f"{name}: {type(e).__name__}: {e}"
        if r.get("isError"):
            return False, f"{name}: " + " ".join(c.get("text", "") for c in r.get("content", []))
        return True, ""
    return call


def sdk_call(c: Client) -> Call:
    async def call(name: str, args: dict[str, Any]) -> tuple[bool, str]:
        try:
            r = await c.call_tool(name, args)
        except Exception as e:  # noqa: BLE001 - a failed call is counted, not raised
            return False, f"{name}: {type(e).__name__}: {e}"
        if r.is_error:
            return False, f"{name}: " + " ".join(getattr(x, "text", "") for x in r.content)
        return True, ""
    return call


async def writer(row: Row, kind: str, w: int, call: Call) -> None:
    calls = memstrata_calls if kind == "memstrata" else reference_calls
    for i in range(K):
        for what, name, args in calls(w, i):
            ok, err = await call(name, args)
            if ok:
                (row.acked_facts if what == "fact" else row.acked_items).add(
                    fact_key(w, i) if what == "fact" else item_key(w, i))
            else:
                row.errors.append(err)


def refused(row: Row, w: int, why: str) -> None:
    """A writer whose server never came up: all its writes are errors (refused), none acknowledged."""
    row.errors.extend([why] * (2 * K))


# ---- counting, with a fresh client -----------------------------------------------------------------

ALL_FACTS = [fact_key(w, i) for w in range(WRITERS) for i in range(K)]
ALL_FACT_SET = set(ALL_FACTS)
ALL_ITEMS = {item_key(w, i) for w in range(WRITERS) for i in range(K)}


async def count_memstrata_with(call_tool: Callable[[str, dict[str, Any]], Awaitable[Any]]) -> tuple[set[str], set[str]]:
    found: set[str] = set()
    todo = iter(ALL_FACTS)

    async def worker() -> None:
        for key in todo:
            r = await call_tool("knowledge_retrieve", {"key": key})
            if r and r.get("found"):
                found.add(key)

    await asyncio.gather(*(worker() for _ in range(COUNT_DEPTH)))
    r = await call_tool("knowledge_retrieve", {"key": SHARED})
    knowledge = ((r or {}).get("entry") or {}).get("knowledge") or {}
    return found, set(knowledge) & ALL_ITEMS


async def count_raw(kind: str, argv: list[str], env: dict[str, str], where: Path) -> tuple[set[str], set[str]]:
    raw = Tracked(argv, env, where / f"count-{time.monotonic_ns()}.stderr")
    try:
        await raw.start()

        async def call_tool(name: str, args: dict[str, Any]) -> Any:
            r = await raw.call_tool(name, args)
            if r.get("isError"):
                raise RuntimeError(f"{name}: {r.get('content')}")
            return r.get("structuredContent")

        if kind == "memstrata":
            return await count_memstrata_with(call_tool)
        graph = await call_tool("read_graph", {})
        facts, items = set(), set()
        for e in graph.get("entities", []):
            if e["name"] == SHARED:
                items = {o.split(":", 1)[0] for o in e["observations"]} & ALL_ITEMS
            elif e["name"] in ALL_FACT_SET:
                facts.add(e["name"])
        return facts, items
    except RpcError as e:
        raise RuntimeError(f"counting client failed: {e}; stderr: {raw.stderr_text()[-300:]}") from None
    finally:
        await raw.close()


# ---- scenarios -------------------------------------------------------------------------------------

class Tracked(RawStdio):
    """A RawStdio that registers itself, so a scenario that times out can kill every server it started."""

    live: list[RawStdio] = []

    def __init__(self, argv: list[str], env: dict[str, str] | None, stderr_path: Path) -> None:
        super().__init__(argv, env, stderr_path)
        Tracked.live.append(self)

    @classmethod
    def kill_all(cls) -> None:
        for raw in cls.live:
            if raw.proc and raw.proc.returncode is None:
                raw.proc.kill()
        cls.live.clear()


async def setup_shared(kind: str, argv: list[str], env: dict[str, str], where: Path) -> None:
    raw = Tracked(argv, env, where / "setup.stderr")
    try:
        await raw.start()
        r = await raw.call_tool(*SETUP[kind])
        if r.get("isError"):
            raise RuntimeError(f"creating the shared record failed: {r.get('content')}")
    finally:
        await raw.close()


async def one_stdio_connection(row: Row, kind: str, argv: list[str], env: dict[str, str], where: Path) -> None:
    await setup_shared(kind, argv, env, where)
    raw = Tracked(argv, env, where / "writers.stderr")
    await raw.start()
    call = raw_call(raw)
    await asyncio.gather(*(writer(row, kind, w, call) for w in range(WRITERS)))
    rc = await raw.close()
    if rc not in (0, None):
        row.note = f"server exited {rc} after the writers: {raw.stderr_text()[-200:]}"
    row.found_facts, row.found_items = await count_raw(kind, argv, env, where)


async def many_processes(row: Row, kind: str, argv: list[str], env: dict[str, str], where: Path) -> None:
    await setup_shared(kind, argv, env, where)
    raws = [Tracked(argv, env, where / f"writer-{w:02}.stderr") for w in range(WRITERS)]
    started = await asyncio.gather(*(r.start() for r in raws), return_exceptions=True)
    up = [w for w, s in enumerate(started) if not isinstance(s, BaseException)]
    for w, s in enumerate(started):
        if isinstance(s, BaseException):
            await raws[w].close(timeout=10)
            why = raws[w].stderr_text().splitlines()[-1:] or [f"{type(s).__name__}: {s}"]
            refused(row, w, "server refused to start: " + why[0].replace(str(where), "DIR"))
    # All surviving sessions are initialized before the first write: the writes overlap for real.
    await asyncio.gather(*(writer(row, kind, w, raw_call(raws[w])) for w in up))
    for w in up:
        await raws[w].close()
    row.note = f"{len(up)} of {WRITERS} server processes started"
    row.found_facts, row.found_items = await count_raw(kind, argv, env, where)


async def http_sessions(row: Row, binary: str, where: Path) -> None:
    tally = LogCount()
    sdk_log = logging.getLogger("mcp.client.streamable_http")
    sdk_log.addHandler(tally)
    sdk_log.propagate = False
    try:
        await http_sessions_logged(row, binary, where)
    finally:
        sdk_log.removeHandler(tally)
        sdk_log.propagate = True
        if tally.seen:
            row.note = "the SDK client logged while closing the sessions (no call failed): " + ", ".join(
                f"“{m}” ×{n}" for m, n in tally.seen.items())
            if any(m.startswith("Session termination failed: 202") for m in tally.seen):
                row.note += (" (the server, rmcp's streamable HTTP transport, answers the session DELETE with 202 "
                             "Accepted and this SDK calls anything but 200/204 a failure; the sessions are closed "
                             "either way)")
            if any("BrokenResourceError" in m for m in tally.seen):
                row.note += (" (BrokenResourceError: a server notification, e.g. resources/list_changed, arriving "
                             "on a session the client had already closed)")


async def http_sessions_logged(row: Row, binary: str, where: Path) -> None:
    store = where / "store.mem"
    proc, port = start_http(binary, store)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        async with Client(streamable_http_client(url), mode="legacy", read_timeout_seconds=TIMEOUT) as c:
            r = await c.call_tool(*SETUP["memstrata"])
            if r.is_error:
                raise RuntimeError(f"creating the shared record failed: {r.content}")
        barrier = asyncio.Barrier(WRITERS)

        async def session(w: int) -> None:
            try:
                async with Client(streamable_http_client(url), mode="legacy", read_timeout_seconds=TIMEOUT) as c:
                    await barrier.wait()  # all 50 sessions open before the first write
                    await writer(row, "memstrata", w, sdk_call(c))
            except BaseException as e:  # noqa: BLE001 - a session that failed to open is an error, reported
                if isinstance(e, asyncio.CancelledError):
                    raise
                await barrier.abort()
                row.errors.append(f"session {w}: {type(e).__name__}: {e}")

        await asyncio.gather(*(session(w) for w in range(WRITERS)))

        async with Client(streamable_http_client(url), mode="legacy", read_timeout_seconds=TIMEOUT) as c:
            async def call_tool(name: str, args: dict[str, Any]) -> Any:
                r = await c.call_tool(name, args)
                if r.is_error:
                    raise RuntimeError(f"{name}: {r.content}")
                return r.structured_content

            row.found_facts, row.found_items = await count_memstrata_with(call_tool)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            row.failure = "the HTTP server did not stop within 60 s of SIGTERM and was killed"
    argv = [binary, "--store", str(store), "--no-audit", "stdio"]
    row.after_restart = await count_raw("memstrata", argv, dict(os.environ), where)


async def run(row: Row, body: Awaitable[None]) -> Row:
    print(f"   mcp concurrency: {row.scenario} — {row.server}", file=sys.stderr)
    row.attempted = 2 * WRITERS * K
    t = time.perf_counter()
    try:
        await asyncio.wait_for(body, SCENARIO_TIMEOUT)
    except asyncio.TimeoutError:
        row.failure = f"hung: not finished after {SCENARIO_TIMEOUT} s (killed)"
    except Exception as e:  # noqa: BLE001 - reported in the table
        row.failure = f"failed: {type(e).__name__}: {e}"
    finally:
        Tracked.kill_all()
    row.seconds = time.perf_counter() - t
    print(f"     {row.seconds:.1f} s: acknowledged {row.acked}, errors {len(row.errors)}, "
          f"found {len(row.found_facts)} facts + {len(row.found_items)} items, lost {row.lost}"
          + (f", {row.failure}" if row.failure else ""), file=sys.stderr)
    return row


# ---- report --------------------------------------------------------------------------------------

def sample(errors: list[str]) -> str:
    if not errors:
        return "0"
    distinct = len(set(errors))
    s = errors[0].replace("|", "\\|").replace("\n", " ")
    s = s if len(s) <= 220 else s[:217] + "…"
    return f"{len(errors)} — e.g. “{s}”" + (f" ({distinct} distinct)" if distinct > 1 else "")


def markdown(rows: list[Row], ref_version: str, node_version: str, sdk_version: str) -> list[str]:
    n = WRITERS * K
    lines = [
        "### Concurrent writers: what each server loses\n",
        f"{WRITERS} concurrent writers, each making {K} writes ({n} in all); every write is two calls: store a "
        f"distinct fact (`knowledge_store` / `create_entities`) and append one item to ONE shared record created "
        f"beforehand (memstrata-mcp: `knowledge_update` with a merge patch adding one member, "
        f"`{{\"w07-i13\": \"…\"}}`, so the client does no read-modify-write; reference: `add_observations` on one "
        f"entity) — {2 * n} calls attempted per row. Each writer waits for each answer; the writers run "
        f"concurrently and nothing serializes them. When they are done, a fresh client (a new session or a new "
        f"server process) counts what is there: every fact by key (`knowledge_retrieve` / one `read_graph`) and "
        f"the items in the shared record. acknowledged = a success result came back; errors = an error result, a "
        f"protocol error, or a server that refused to start (each of its writer's {2 * K} calls counted as "
        f"refused); **LOST = acknowledged but not found** (a refused write is visible to its writer and is not "
        f"lost). Rows: (a) one server process, {WRITERS} concurrent sessions — memstrata-mcp over streamable "
        f"HTTP ({WRITERS} SDK `mcp.Client` sessions, mcp {sdk_version}, on one `memstrata-mcp http`; counted "
        f"on a fresh session, then again after SIGTERM and reopening the store), and both servers with the "
        f"{WRITERS} writers multiplexed on one stdio connection (raw JSON-RPC client, up to {WRITERS} calls in "
        f"flight); (b) {WRITERS} server processes on one store, how {WRITERS} agents each spawning their own "
        f"server share memory — {WRITERS} `node index.js` with the same `MEMORY_FILE_PATH`, {WRITERS} "
        f"`memstrata-mcp stdio` on the same `--store` (one opens it; the others refuse with StoreLocked, by "
        f"design). Reference: `@modelcontextprotocol/server-memory` {ref_version} on Node {node_version}; "
        f"memstrata-mcp release build (`Durability::Periodic`). time = the whole row: server start-up, the "
        f"writes, shutdown and the count; each row has a {SCENARIO_TIMEOUT} s limit, after which it is reported "
        f"as hung.\n",
        "| scenario | server | calls attempted | acknowledged | errors | facts found / acknowledged | "
        "shared-record items found / acknowledged | LOST | time |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r.failure:
            lines.append(f"| {r.scenario} | {r.server} | {r.attempted} | {r.acked} | {sample(r.errors)} | "
                         f"– | – | **{r.failure}** | {r.seconds:.1f} s |")
            continue
        ff = f"{len(r.found_facts)} / {len(r.acked_facts)}"
        fi = f"{len(r.found_items)} / {len(r.acked_items)}"
        if r.after_restart:
            f, i = r.after_restart
            ff += f" (after restart: {len(f)})" if f != r.found_facts else " (same after restart)"
            fi += f" (after restart: {len(i)})" if i != r.found_items else " (same after restart)"
        lost = r.lost
        lost_s = f"**{lost}** ({100 * lost / max(1, r.acked):.0f}% of acknowledged)" if lost else "0"
        lines.append(f"| {r.scenario} | {r.server} | {r.attempted} | {r.acked} | {sample(r.errors)} | {ff} | {fi} "
                     f"| {lost_s} | {r.seconds:.1f} s |")
    notes = [f"{r.scenario}, {r.server}: {r.note}" for r in rows if r.note]
    if notes:
        lines += ["", "Notes:", ""] + [f"- {n}." for n in notes]
    bad = [r for r in rows if r.server.startswith("memstrata") and (r.lost or r.failure)]
    if bad:
        lines += ["", "**memstrata-mcp lost acknowledged writes or did not finish — a correctness problem: " + "; ".join(
            f"{r.scenario}, {r.server}: {r.failure or str(r.lost) + ' acknowledged writes lost'}" for r in bad) + ".**"]
    return lines


async def main() -> int:
    binary, ref_js, data_path, out_path = sys.argv[1:5]
    data = json.loads(Path(data_path).read_text())
    TEXTS.extend(v["text"] for _, v in data["kv"][: WRITERS * K])
    node = shutil.which("node")
    have_ref = bool(node) and Path(ref_js).exists()
    rows: list[Row] = []
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        tmpd = Path(tmp)

        def where(tag: str) -> Path:
            return Path(tempfile.mkdtemp(dir=tmpd, prefix=tag + "-"))

        a, b = "(a) one server process", f"(b) {WRITERS} server processes, one store"
        row = Row(a, f"memstrata-mcp, streamable HTTP, {WRITERS} SDK sessions")
        rows.append(await run(row, http_sessions(row, binary, where("http"))))
        kinds = ["memstrata"] + (["reference"] if have_ref else [])
        label = {"memstrata": "memstrata-mcp", "reference": "reference server-memory"}
        for kind in kinds:
            d = where(f"one-{kind}")
            argv, env = server_command(kind, binary, ref_js, node or "node", d)
            row = Row(a, f"{label[kind]}, one stdio connection, {WRITERS} writers multiplexed")
            rows.append(await run(row, one_stdio_connection(row, kind, argv, env, d)))
        for kind in kinds:
            d = where(f"many-{kind}")
            argv, env = server_command(kind, binary, ref_js, node or "node", d)
            row = Row(b, f"{label[kind]}, {WRITERS} stdio server processes")
            rows.append(await run(row, many_processes(row, kind, argv, env, d)))

    node_version = subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip() if node else "–"
    ref_pkg = Path(ref_js).parent.parent / "package.json"
    ref_version = json.loads(ref_pkg.read_text()).get("version", "?") if ref_pkg.exists() else "not installed"
    import importlib.metadata

    lines = markdown(rows, ref_version, node_version, importlib.metadata.version("mcp"))
    if not have_ref:
        lines += ["", "The reference server is not installed in this run (needs `node` and npm): its rows are missing."]
    Path(out_path).write_text("\n".join(lines) + "\n\n")
    print("\n".join(lines))
    print(f"   mcp concurrency: {time.perf_counter() - t0:.0f} s in all", file=sys.stderr)
    mem = [r for r in rows if r.server.startswith("memstrata")]
    if any(r.lost for r in mem):
        return 3
    if any(r.failure for r in mem):
        return 4
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
