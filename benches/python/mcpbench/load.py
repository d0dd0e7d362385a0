"""The bounded loopback load: C clients at once against one memstrata-mcp instance, a fixed mix of
writes / reads / searches for D seconds, then every acknowledged write read back (lost)."""

from __future__ import annotations

import asyncio
import logging
import os
import random
import sys
import tempfile
import time
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator

from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from mcpbench.clients import Call, LogCount, RawStdio, execute_caller, http_server, ws_session
from mcpbench.data import WORDS, fact
from mcpbench.figures import fmt_ns, pct

LOAD_C = int(os.environ.get("MCP_LOAD_CONCURRENCY", "8"))
LOAD_C_WIDE = int(os.environ.get("MCP_LOAD_WIDE_CONCURRENCY", "64"))  # the wide HTTP row
# The same rows again with an earlier behaviour, on a server started with
# MEMSTRATA_SEARCH_COMMIT=<mode>: MCP_LOAD_BASELINE=soft (default; before the index overlay,
# every search that finds index changes pending makes a soft tantivy commit), =durable
# (before soft commits: a durable commit instead), =soft,durable (both), =0 (none).
# MCP_LOAD_JSON=FILE also writes the rows' figures as JSON (make bench-quick reads them).
LOAD_BASELINES = [b for b in os.environ.get("MCP_LOAD_BASELINE", "soft").split(",") if b and b != "0"]
for _b in LOAD_BASELINES:
    if _b not in ("soft", "durable"):
        raise SystemExit(f"MCP_LOAD_BASELINE: unknown mode {_b!r} (use soft, durable, soft,durable or 0)")
BASELINE_WHAT = {
    "soft": "before the index overlay: a soft commit per search",
    "durable": "before soft commits: a durable commit per search",
}
LOAD_SECONDS = float(os.environ.get("MCP_LOAD_SECONDS", "10"))
LOAD_WARMUP_SECONDS = float(os.environ.get("MCP_LOAD_WARMUP_SECONDS", "1"))
LOAD_PREFILL = 300
LOAD_CALL_TIMEOUT = 30.0  # a call without an answer by then is an error (and the row goes on)
LOAD_WRITE, LOAD_READ = 0.2, 0.6  # the rest are searches
# Issue #14: 8 clients on every transport >= 2000 calls/s, p95 < 25 ms, p99 < 100 ms;
# 64 HTTP clients >= 1500 calls/s, p99 < 100 ms, no errors, no lost writes.
TARGET_P95_NS = 25_000_000
TARGET_P99_NS = 100_000_000
TARGET_CALLS_S = {8: 2000, 64: 1500}


class LoadRow:
    def __init__(self, short: str, label: str, c: int, baseline: str | None = None) -> None:
        self.short, self.label, self.c, self.baseline = short, label, c, baseline
        self.acked: list[str] = []  # keys of every acknowledged write (pre-fill, warm-up, measured)
        self.lost: int | None = None  # acknowledged writes not found afterwards
        self.lat: list[int] = []  # ns, every call of the measured window that succeeded
        self.by_op: dict[str, list[int]] = {"write": [], "read": [], "search": []}  # the same, by op
        self.errors: list[str] = []  # measured window
        self.setup_errors: list[str] = []  # pre-fill and warm-up
        self.wall_s = 0.0
        self.failure: str | None = None
        self.notes: list[str] = []


def load_key(i: int) -> str:
    return f"load-{i:06}"


def load_store(data: dict[str, Any], i: int) -> tuple[str, dict[str, Any]]:
    f = fact(data, i)
    return "knowledge_store", {"key": load_key(i), "knowledge": {
        "entityType": f["entityType"], "observations": f["observations"]}}


def load_op(rng: random.Random, data: dict[str, Any], writes: Any) -> tuple[str, str, dict[str, Any]]:
    """(kind, tool, arguments) of the next call of the mix; `writes` numbers the new keys."""
    x = rng.random()
    if x < LOAD_WRITE:
        return ("write", *load_store(data, LOAD_PREFILL + next(writes)))
    if x < LOAD_WRITE + LOAD_READ:
        return "read", "knowledge_retrieve", {"key": load_key(rng.randrange(LOAD_PREFILL))}
    return "search", "knowledge_query", {"text": WORDS[rng.randrange(len(WORDS))], "limit": 10}


async def load_call(call: Call, kind: str, name: str, args: dict[str, Any]) -> str | None:
    """One call of the mix: None on success, else what went wrong (never raises, except on cancellation)."""
    try:
        r = await asyncio.wait_for(call(name, args), LOAD_CALL_TIMEOUT)
    except asyncio.TimeoutError:
        return f"{name}: no answer within {LOAD_CALL_TIMEOUT:.0f} s"
    except Exception as e:  # noqa: BLE001 - counted, not raised
        return f"{name}: {type(e).__name__}: {e}"
    if kind == "read" and isinstance(r, dict) and r.get("found") is False:
        return f"{name}: pre-filled key {args['key']} not found"
    return None


async def load_drive(row: LoadRow, calls: list[Call], seconds: float, data: dict[str, Any], writes: Any,
                     seed: int, measured: bool) -> None:
    """Every client loops on the mix, one call at a time, until `seconds` have passed (the last call ends after)."""
    deadline = time.perf_counter() + seconds

    async def client(w: int, call: Call) -> None:
        rng = random.Random(seed * 1000 + w)
        while time.perf_counter() < deadline:
            kind, name, args = load_op(rng, data, writes)
            t = time.perf_counter_ns()
            err = await load_call(call, kind, name, args)
            dt = time.perf_counter_ns() - t
            if kind == "write" and not err:
                row.acked.append(args["key"])
            if not measured:
                if err:
                    row.setup_errors.append(err)
            elif err:
                row.errors.append(err)
            else:
                row.lat.append(dt)
                row.by_op[kind].append(dt)

    t0 = time.perf_counter()
    await asyncio.gather(*(client(w, call) for w, call in enumerate(calls)))
    if measured:
        row.wall_s = time.perf_counter() - t0


async def load_run(row: LoadRow, calls: list[Call], data: dict[str, Any], seed: int) -> None:
    todo = iter(range(LOAD_PREFILL))

    async def prefill(call: Call) -> None:
        for i in todo:
            err = await load_call(call, "write", *load_store(data, i))
            if err:
                row.setup_errors.append(err)
            else:
                row.acked.append(load_key(i))

    await asyncio.gather(*(prefill(call) for call in calls))
    writes = iter(range(10**9))
    await load_drive(row, calls, LOAD_WARMUP_SECONDS, data, writes, seed, measured=False)
    await load_drive(row, calls, LOAD_SECONDS, data, writes, seed + 1, measured=True)
    # Lost writes: every acknowledged key read back on the same instance.
    todo_keys = iter(row.acked)
    lost = 0

    async def check(call: Call) -> None:
        nonlocal lost
        for key in todo_keys:
            try:
                r = await asyncio.wait_for(call("knowledge_retrieve", {"key": key}), LOAD_CALL_TIMEOUT)
                if not (isinstance(r, dict) and r.get("found") is not False):
                    lost += 1
            except Exception:  # noqa: BLE001 - a failed read-back counts as lost
                lost += 1

    await asyncio.gather(*(check(call) for call in calls))
    row.lost = lost


@asynccontextmanager
async def load_clients(transport: str, binary: str, where: Path, c: int) -> AsyncIterator[list[Call]]:
    """`c` tools/call functions on one fresh memstrata-mcp; each returns the structured result, raises on error."""
    store = where / "store.mem"
    if transport == "stdio":
        raw = RawStdio([binary, "--store", str(store), "--no-audit", "stdio"], dict(os.environ), where / "stderr.log")
        try:
            await raw.start()

            async def raw_call(name: str, args: dict[str, Any]) -> Any:
                r = await raw.call_tool(name, args, LOAD_CALL_TIMEOUT)
                if r.get("isError"):
                    raise RuntimeError(f"tool error: {r.get('content')}")
                return r.get("structuredContent", {})

            yield [raw_call] * c  # c requests in flight on the one connection
        finally:
            await raw.close()
        return
    async with http_server(binary, store) as port, AsyncExitStack() as stack:
        calls: list[Call] = []
        if transport == "ws":
            for _ in range(c):
                ws_call = await stack.enter_async_context(ws_session(f"ws://127.0.0.1:{port}/mcp/ws",
                                                                    LOAD_CALL_TIMEOUT))
                calls.append(ws_structured(ws_call))
        elif transport == "http-sdk":
            for _ in range(c):
                sdk = await stack.enter_async_context(Client(
                    streamable_http_client(f"http://127.0.0.1:{port}/mcp"), mode="legacy",
                    read_timeout_seconds=LOAD_CALL_TIMEOUT))
                calls.append(sdk_structured(sdk))
        elif transport == "execute":
            import httpx

            for _ in range(c):
                http = await stack.enter_async_context(httpx.AsyncClient(timeout=LOAD_CALL_TIMEOUT))
                calls.append(execute_caller(http, f"http://127.0.0.1:{port}/mcp/v1/execute"))
        else:
            raise ValueError(transport)
        yield calls


def ws_structured(call: Call) -> Call:
    async def structured(name: str, args: dict[str, Any]) -> Any:
        return (await call(name, args)).get("structuredContent", {})

    return structured


def sdk_structured(c: Client) -> Call:
    async def call(name: str, args: dict[str, Any]) -> Any:
        r = await c.call_tool(name, args)
        if r.is_error:
            raise RuntimeError(f"tool error: {r.content}")
        return r.structured_content or {}

    return call


LOAD_TRANSPORTS = (  # (transport, short name, row label, clients)
    ("stdio", "stdio", "stdio, raw JSON-RPC client, {c} requests in flight on one connection", LOAD_C),
    ("ws", "WebSocket", "WebSocket, {c} connections (raw JSON-RPC frames)", LOAD_C),
    ("http-sdk", "streamable HTTP (SDK)", "streamable HTTP, {c} SDK `mcp.Client` sessions", LOAD_C),
    ("execute", "`/mcp/v1/execute`", "HTTP `POST /mcp/v1/execute`, {c} keep-alive `httpx` clients", LOAD_C),
    ("execute", "`/mcp/v1/execute` ×{c}", "HTTP `POST /mcp/v1/execute`, {c} keep-alive `httpx` clients",
     LOAD_C_WIDE),
)
def baseline_suffix(b: str) -> str:
    return f" — {BASELINE_WHAT[b]}"


async def run_load(binary: str, data: dict[str, Any], tmpd: Path) -> tuple[list[LoadRow], float]:
    rows = []
    t_all = time.perf_counter()
    plan: list[tuple[int, Any, str | None]] = [(seed, t, None) for seed, t in enumerate(LOAD_TRANSPORTS)]
    for b in LOAD_BASELINES:
        plan += [(seed, t, b) for seed, t in enumerate(LOAD_TRANSPORTS)]
    for seed, (transport, short, label, c), baseline in plan:
        row = LoadRow(short.format(c=c) + (f" ({baseline} search commits)" if baseline else ""),
                      label.format(c=c) + (baseline_suffix(baseline) if baseline else ""), c, baseline)
        where = Path(tempfile.mkdtemp(dir=tmpd, prefix=f"load-{transport}-"))
        if baseline:
            os.environ["MEMSTRATA_SEARCH_COMMIT"] = baseline
        else:
            os.environ.pop("MEMSTRATA_SEARCH_COMMIT", None)
        print(f"   mcp load: {row.label}, {LOAD_SECONDS:g} s", file=sys.stderr)
        tally = LogCount()
        sdk_log = logging.getLogger("mcp.client.streamable_http")
        sdk_log.addHandler(tally)
        sdk_log.propagate = False
        t = time.perf_counter()
        try:
            async with load_clients(transport, binary, where, c) as calls:
                await load_run(row, calls, data, 100 * seed)
        except Exception as e:  # noqa: BLE001 - a row that could not run is reported, the others still run
            row.failure = f"{type(e).__name__}: {e}"
        finally:
            sdk_log.removeHandler(tally)
            sdk_log.propagate = True
            os.environ.pop("MEMSTRATA_SEARCH_COMMIT", None)
        if tally.seen:
            note = "the SDK client logged " + ", ".join(f"“{m[:160]}” ×{n}" for m, n in tally.seen.items())
            if any(m.startswith("Session termination failed: 202") for m in tally.seen):
                note += (" (closing its sessions: the server, rmcp's streamable HTTP transport, answers the session "
                         "DELETE with 202 Accepted, and this SDK calls anything but 200/204 a failure; the sessions "
                         "are closed either way)")
            row.notes.append(note)
        rate = len(row.lat) / row.wall_s if row.wall_s else 0
        p = (lambda q: fmt_ns(pct(row.lat, q))) if row.lat else (lambda q: "–")
        print(f"     {len(row.lat)} calls, {rate:.0f}/s, p95 {p(0.95)}, p99 {p(0.99)}, {len(row.errors)} errors, "
              f"{row.lost} lost, {time.perf_counter() - t:.1f} s", file=sys.stderr)
        rows.append(row)
    return rows, time.perf_counter() - t_all


def target_status(r: LoadRow) -> str:
    """Issue #14's target for the row (by its number of clients) and whether it is met."""
    goal = TARGET_CALLS_S.get(r.c)
    if goal is None or r.baseline:
        return "–"
    rate = len(r.lat) / r.wall_s
    p95, p99 = pct(r.lat, 0.95), pct(r.lat, 0.99)
    checks = [rate >= goal, p99 < TARGET_P99_NS]
    want = f"≥ {goal}/s, p99 < 100 ms"
    if r.c == LOAD_C:
        checks.append(p95 < TARGET_P95_NS)
        want = f"≥ {goal}/s, p95 < 25 ms, p99 < 100 ms"
    else:
        checks += [not r.errors, r.lost == 0]
        want += ", 0 errors, 0 lost"
    return f"{want}: " + ("met" if all(checks) else "**missed**")


def load_markdown(rows: list[LoadRow], total_s: float) -> list[str]:
    cores = os.cpu_count() or "?"
    mix = f"{LOAD_WRITE:.0%} / {LOAD_READ:.0%} / {1 - LOAD_WRITE - LOAD_READ:.0%}"
    lines = [
        "### Bounded loopback load\n",
        f"One memstrata-mcp instance per row (the release build, a fresh store, `--no-audit`) serving C "
        f"clients at once over loopback; each client waits for its answer before it sends its next call, so at "
        f"most C calls are in flight. Per row: a pre-fill of {LOAD_PREFILL} entities (not measured), "
        f"{LOAD_WARMUP_SECONDS:g} s of warm-up, then D = {LOAD_SECONDS:g} s of a fixed mix, "
        f"writes / reads / searches = {mix}: WRITES `knowledge_store` a new key each (a fact with three "
        f"observations), READS `knowledge_retrieve` a random pre-filled key (a read that does not find it counts "
        f"as an error), SEARCHES `knowledge_query` one word, limit 10. stdio: the raw JSON-RPC client with "
        f"C requests in flight on its one connection; WebSocket: C connections with raw JSON-RPC "
        f"frames; streamable HTTP: C sessions of the official Python SDK client (`mcp.Client`), and, to "
        f"show the server without that client's cost, C keep-alive `httpx` clients posting the plain "
        f"`/mcp/v1/execute` envelope (C = {LOAD_C}, and a wide row with C = {LOAD_C_WIDE}). calls/s = completed "
        f"calls ÷ the wall time of the measured window (D, plus the last calls that were still in flight at its "
        f"end); p50/p95/p99 over all completed calls of the mix (errors are counted apart and not in the "
        f"latencies). lost = writes acknowledged (pre-fill, warm-up and measured) that a `knowledge_retrieve` "
        f"on the same instance does not find afterwards. The server as shipped serves a search that must see "
        f"writes not yet in an index commit from its in-memory overlay, without a commit. Rows marked *before* "
        f"run the same load, in the same run, on a server started with `MEMSTRATA_SEARCH_COMMIT=soft` (before "
        f"the overlay: a search that finds index changes pending makes a soft tantivy commit) or `=durable` "
        f"(before soft commits: a durable commit). The target column is issue #14's. The Python clients (one process, one event loop) and the server share the "
        f"machine's {cores} cores, so these figures are a floor for the server.\n",
        "| transport, clients | C | calls completed | calls/s | p50 | p95 | p99 | errors | lost | target |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    notes = []
    for r in rows:
        if r.failure or not r.lat:
            why = r.failure or (r.errors[0][:160] if r.errors else "no call completed")
            lines.append(f"| {r.label} | {r.c} | {len(r.lat)} | – | – | – | – | {len(r.errors)} | – | "
                         f"not measured: {why} |")
            continue
        rate = len(r.lat) / r.wall_s
        err = f"{len(r.errors)} (e.g. {r.errors[0][:120]})" if r.errors else "0"
        lines.append(
            f"| {r.label} | {r.c} | {len(r.lat)} ({' / '.join(str(len(xs)) for xs in r.by_op.values())}) | "
            f"{rate:.0f} | {fmt_ns(pct(r.lat, 0.5))} | {fmt_ns(pct(r.lat, 0.95))} | {fmt_ns(pct(r.lat, 0.99))} | "
            f"{err} | {r.lost if r.lost is not None else '–'} | {target_status(r)} |")
        if r.setup_errors:
            notes.append(f"{r.label}: {len(r.setup_errors)} errors during pre-fill and warm-up "
                         f"(e.g. {r.setup_errors[0][:160]})")
        notes += [f"{r.label}: {n}" for n in r.notes]
    by_op = "; ".join(f"{r.short} " + ", ".join(
        f"{fmt_ns(pct(xs, 0.5))} / {fmt_ns(pct(xs, 0.95))}" if xs else "–" for xs in r.by_op.values())
        for r in rows if r.lat)
    ratios = []
    for r in rows:
        for bl in LOAD_BASELINES:
            b = next((x for x in rows if x.baseline == bl and not r.baseline
                      and x.label == r.label + baseline_suffix(bl)), None)
            if b and r.lat and b.lat:
                ratios.append(f"{r.short} ÷ {bl} search commits {len(r.lat) / r.wall_s / (len(b.lat) / b.wall_s):.1f}× "
                              f"(p99 {fmt_ns(pct(b.lat, 0.99))} → {fmt_ns(pct(r.lat, 0.99))})")
    lines += ["", f"Calls completed are split as writes / reads / searches. p50 / p95 by op, writes / reads / "
              f"searches: {by_op}. Wall time of this section: {total_s:.0f} s ({len(rows)} rows, each with "
              f"server start, pre-fill, warm-up and D = {LOAD_SECONDS:g} s of load)."]
    if ratios:
        lines += ["", "calls/s as shipped ÷ before, same run: " + "; ".join(ratios) + "."]
    if notes:
        lines += [""] + [f"- {n}" for n in notes]
    return lines


def load_json(rows: list[LoadRow]) -> list[dict[str, Any]]:
    """The load rows as figures (read by benches/python/quick_report.py)."""
    out = []
    for r in rows:
        ok = bool(r.lat) and not r.failure
        out.append({
            "short": r.short, "label": r.label, "clients": r.c, "baseline": r.baseline,
            "calls": len(r.lat), "rate": len(r.lat) / r.wall_s if ok and r.wall_s else None,
            "p50_ns": pct(r.lat, 0.5) if ok else None, "p95_ns": pct(r.lat, 0.95) if ok else None,
            "p99_ns": pct(r.lat, 0.99) if ok else None, "errors": len(r.errors), "lost": r.lost,
            "failure": r.failure, "target": target_status(r) if ok else "not measured",
        })
    return out
