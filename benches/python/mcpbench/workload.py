"""The end-to-end workload on both servers over stdio: store N facts, then S searches, with the SDK
client and the raw JSON-RPC client, then pipelined with a count of the facts each server kept."""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Awaitable, Callable

from mcp import Client, StdioServerParameters

from mcpbench.clients import TIMEOUT, RawStdio, RpcError
from mcpbench.data import WORDS, fact

WORKLOAD_N = (300, 3000)
WORKLOAD_S = 300
WORKLOAD_WARMUP = 10
PIPELINE_DEPTH = 16

# (name, arguments) of call i.
Op = Callable[[int], tuple[str, dict[str, Any]]]
# A tools/call: (success, structured result or error text).
ToolCall = Callable[[str, dict[str, Any]], Awaitable[tuple[bool, Any]]]


def workload_ops(kind: str, data: dict[str, Any]) -> tuple[Op, Op]:
    """(store fact i, search i) for one server: the same fact and the same one-word query on both."""
    if kind == "memstrata":
        def store(i: int) -> tuple[str, dict[str, Any]]:
            f = fact(data, i)
            return "knowledge_store", {"key": f["name"], "knowledge": {
                "entityType": f["entityType"], "observations": f["observations"]}}

        return store, lambda i: ("knowledge_query", {"text": WORDS[i % len(WORDS)], "limit": 10})
    return (lambda i: ("create_entities", {"entities": [fact(data, i)]}),
            lambda i: ("search_nodes", {"query": WORDS[i % len(WORDS)]}))


def server_command(kind: str, binary: str, ref_js: str, node: str, where: Path) -> tuple[list[str], dict[str, str]]:
    """argv and environment of a stdio server on a fresh store under `where`."""
    if kind == "memstrata":
        return [binary, "--store", str(where / "store.mem"), "--no-audit", "stdio"], dict(os.environ)
    return [node, ref_js], {**os.environ, "MEMORY_FILE_PATH": str(where / "memory.jsonl")}


async def sequential_workload(call: ToolCall, store: Op, search: Op, n: int, s: int) -> dict[str, float]:
    for i in range(WORKLOAD_WARMUP):
        await call(*search(i))
    lat = []
    t0 = time.perf_counter()
    for i in range(n):
        t = time.perf_counter_ns()
        ok, r = await call(*store(i))
        lat.append(time.perf_counter_ns() - t)
        if not ok:
            raise RuntimeError(f"store {i} failed: {r}")
    t1 = time.perf_counter()
    for i in range(s):
        ok, r = await call(*search(i))
        if not ok:
            raise RuntimeError(f"search {i} failed: {r}")
    t2 = time.perf_counter()
    return {"store_s": t1 - t0, "search_s": t2 - t1, "n": n, "s": s,
            "first100_ms": statistics.mean(lat[:100]) / 1e6, "last100_ms": statistics.mean(lat[-100:]) / 1e6}


async def sdk_workload(argv: list[str], env: dict[str, str], store: Op, search: Op, n: int, s: int) -> dict[str, float]:
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=env)
    async with Client(params, mode="legacy", read_timeout_seconds=TIMEOUT) as c:
        async def call(name: str, args: dict[str, Any]) -> tuple[bool, Any]:
            r = await c.call_tool(name, args)
            return not r.is_error, (r.structured_content if not r.is_error else r.content)

        return await sequential_workload(call, store, search, n, s)


async def raw_workload(argv: list[str], env: dict[str, str], where: Path, store: Op, search: Op,
                       n: int, s: int) -> dict[str, float]:
    raw = RawStdio(argv, env, where / "stderr.log")
    await raw.start()
    try:
        async def call(name: str, args: dict[str, Any]) -> tuple[bool, Any]:
            r = await raw.call_tool(name, args)
            return not r.get("isError"), r.get("structuredContent", r.get("content"))

        return await sequential_workload(call, store, search, n, s)
    finally:
        await raw.close()


async def in_flight(raw: RawStdio, count: int, op: Op, depth: int) -> tuple[list[Any], list[str]]:
    """`count` calls with `depth` of them in flight at all times; (successful results by index, error texts)."""
    results: list[Any] = [None] * count
    errors: list[str] = []
    todo = iter(range(count))

    async def worker() -> None:
        for i in todo:
            name, args = op(i)
            try:
                r = await raw.call_tool(name, args)
            except (RpcError, asyncio.TimeoutError) as e:
                errors.append(f"{name}: {e!r}")
                continue
            if r.get("isError"):
                errors.append(f"{name}: {r.get('content')}")
            else:
                results[i] = r.get("structuredContent", {})

    await asyncio.gather(*(worker() for _ in range(depth)))
    return results, errors


async def pipelined_workload(kind: str, argv: list[str], env: dict[str, str], where: Path, data: dict[str, Any],
                             n: int, s: int) -> dict[str, Any]:
    store, search = workload_ops(kind, data)
    raw = RawStdio(argv, env, where / "stderr.log")
    await raw.start()
    try:
        for i in range(WORKLOAD_WARMUP):
            await raw.call_tool(*search(i))
        t0 = time.perf_counter()
        stored, store_errors = await in_flight(raw, n, store, PIPELINE_DEPTH)
        t1 = time.perf_counter()
        _, search_errors = await in_flight(raw, s, search, PIPELINE_DEPTH)
        t2 = time.perf_counter()
        names = [fact(data, i)["name"] for i in range(n)]
        if kind == "memstrata":
            got, _ = await in_flight(raw, n, lambda i: ("knowledge_retrieve", {"key": names[i]}), PIPELINE_DEPTH)
            present = {names[i] for i, r in enumerate(got) if r and r.get("found")}
        else:
            graph = await raw.call_tool("read_graph", {})
            present = {e["name"] for e in graph.get("structuredContent", {}).get("entities", [])}
    finally:
        await raw.close()
    acked = {names[i] for i, r in enumerate(stored) if r is not None}
    return {"n": n, "s": s, "store_s": t1 - t0, "search_s": t2 - t1, "acked": len(acked), "found": len(present),
            "lost": len(acked - present), "errors": store_errors + search_errors}


async def run_workloads(binary: str, ref_js: str, node: str | None, data: dict[str, Any],
                        tmpd: Path) -> dict[str, Any]:
    seq: dict[tuple[str, str, int], dict[str, float]] = {}
    piped: dict[tuple[str, int], dict[str, Any]] = {}
    kinds = ["memstrata"] + (["reference"] if node and Path(ref_js).exists() else [])
    for n in WORKLOAD_N:
        for client in ("sdk", "raw"):
            for kind in kinds:
                where = Path(tempfile.mkdtemp(dir=tmpd, prefix=f"wl-{kind}-{client}-{n}-"))
                argv, env = server_command(kind, binary, ref_js, node or "node", where)
                store, search = workload_ops(kind, data)
                print(f"   mcp workload: {kind}, {client} client, N={n}", file=sys.stderr)
                t = time.perf_counter()
                if client == "sdk":
                    r = await sdk_workload(argv, env, store, search, n, WORKLOAD_S)
                else:
                    r = await raw_workload(argv, env, where, store, search, n, WORKLOAD_S)
                r["wall_s"] = time.perf_counter() - t
                print(f"     {r['wall_s']:.1f} s", file=sys.stderr)
                seq[(client, kind, n)] = r
        for kind in kinds:
            where = Path(tempfile.mkdtemp(dir=tmpd, prefix=f"wl-{kind}-pipe-{n}-"))
            argv, env = server_command(kind, binary, ref_js, node or "node", where)
            print(f"   mcp workload: {kind}, raw client, {PIPELINE_DEPTH} in flight, N={n}", file=sys.stderr)
            t = time.perf_counter()
            piped[(kind, n)] = await pipelined_workload(kind, argv, env, where, data, n, WORKLOAD_S)
            print(f"     {time.perf_counter() - t:.1f} s", file=sys.stderr)
    return {"seq": seq, "piped": piped, "kinds": kinds}


def ops_s(r: dict[str, Any]) -> float:
    return (r["n"] + r["s"]) / (r["store_s"] + r["search_s"])


def workload_markdown(w: dict[str, Any], sdk_version: str, ref_version: str, node_version: str) -> list[str]:
    seq, piped = w["seq"], w["piped"]
    have_ref = "reference" in w["kinds"]
    lines = [
        "### End-to-end workload: store N facts, then search\n",
        f"Equivalent work on both servers over stdio, a fresh store per row: N sequential stores of a fact "
        f"(name, type, three observations of 8–50 words: `knowledge_store` / `create_entities` with one entity), "
        f"then {WORKLOAD_S} sequential one-word searches (`knowledge_query` limit 10 / `search_nodes`, which "
        f"returns every matching entity), after {WORKLOAD_WARMUP} warm-up searches on the empty store. ops/s = "
        f"(N + {WORKLOAD_S}) ÷ the wall time of both phases (server start-up and `initialize` excluded). Each "
        f"row drives both servers with the same client: the official Python SDK client (`mcp.Client`, mcp "
        f"{sdk_version}), and a minimal raw JSON-RPC client (newline-delimited JSON on asyncio pipes, "
        f"`initialize` + `notifications/initialized`, then `tools/call`), which removes the SDK's client-side "
        f"cost per call — the same on both sides — so the ratio shows more of the servers' own difference. "
        f"The reference (`@modelcontextprotocol/server-memory` {ref_version}, Node {node_version}) re-reads and "
        f"re-writes its whole JSON Lines file on every call, so its cost per call grows with N: the last-100 "
        f"columns are the mean latency of the last 100 stores.\n",
        "| client | N + searches | memstrata-mcp stores/s | searches/s | last-100 store | ops/s | "
        "reference stores/s | searches/s | last-100 store | ops/s | ops/s memstrata ÷ reference |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    names = {"sdk": "SDK `mcp.Client`", "raw": "raw JSON-RPC"}
    for n in WORKLOAD_N:
        for client in ("sdk", "raw"):
            m = seq[(client, "memstrata", n)]
            row = [names[client], f"{n} + {m['s']}", f"{m['n'] / m['store_s']:.0f}", f"{m['s'] / m['search_s']:.0f}",
                   f"{m['last100_ms']:.2f} ms", f"{ops_s(m):.0f}"]
            if have_ref:
                r = seq[(client, "reference", n)]
                row += [f"{r['n'] / r['store_s']:.0f}", f"{r['s'] / r['search_s']:.0f}", f"{r['last100_ms']:.2f} ms",
                        f"{ops_s(r):.0f}", f"**{ops_s(m) / ops_s(r):.1f}×**"]
            else:
                row += ["not installed"] * 4 + ["–"]
            lines.append("| " + " | ".join(row) + " |")
    if have_ref:
        ratios = "; ".join(f"N = {n}: " + " / ".join(
            f"{ops_s(seq[(c, 'memstrata', n)]) / ops_s(seq[(c, 'reference', n)]):.1f}× ({names[c]})"
            for c in ("sdk", "raw")) for n in WORKLOAD_N)
        big = seq[("raw", "reference", WORKLOAD_N[-1])]
        lines += ["", f"Workload throughput, memstrata-mcp ÷ reference (the issue's target is at least 10×): {ratios}. "
                  f"The reference's store latency at N = {WORKLOAD_N[-1]} grows from {big['first100_ms']:.1f} ms "
                  f"(first 100 stores) to {big['last100_ms']:.1f} ms (last 100), and each of its "
                  f"N = {WORKLOAD_N[-1]} rows takes about {big['wall_s']:.0f} s; every row runs in full (no sizes or "
                  f"search counts scaled down)."]
    lines += [
        "",
        f"Pipelined, raw JSON-RPC client: the same workload with {PIPELINE_DEPTH} requests in flight at all times "
        f"on the one stdio connection (answers matched by id; stores first, then the searches). Afterwards, on "
        f"the same connection, each server is asked what it holds: memstrata-mcp with `knowledge_retrieve` for "
        f"every key, the reference with one `read_graph`. stored / acknowledged / found = store calls sent / "
        f"answered with a success result / present afterwards; lost = acknowledged but not found (the "
        f"reference handles calls concurrently, and two overlapping read-modify-writes of its file keep only "
        f"the later one).\n",
        "| server | N + searches | ops/s | stored / acknowledged / found | lost | errors |",
        "|---|---|---|---|---|---|",
    ]
    for n in WORKLOAD_N:
        for kind in w["kinds"]:
            p = piped[(kind, n)]
            label = "memstrata-mcp" if kind == "memstrata" else "reference server-memory"
            err = f"{len(p['errors'])} (e.g. {p['errors'][0][:120]})" if p["errors"] else "0"
            lines.append(f"| {label} | {n} + {p['s']} | {ops_s(p):.0f} | {p['n']} / {p['acked']} / {p['found']} | "
                         f"{p['lost']} | {err} |")
    if have_ref:
        kept = " and ".join(f"{piped[('reference', n)]['found']} of {n} (N = {n})" for n in WORKLOAD_N)
        lines += ["", "Pipelined ops/s, memstrata-mcp ÷ reference: " + ", ".join(
            f"N = {n}: {ops_s(piped[('memstrata', n)]) / ops_s(piped[('reference', n)]):.1f}×" for n in WORKLOAD_N)
            + f". The reference's pipelined figure is not the same work: it kept only {kept}, so the file "
            "it re-reads and re-writes on every call stayed that much smaller than in the sequential rows."]
    bad = [n for n in WORKLOAD_N if piped[("memstrata", n)]["lost"]]
    if bad:
        lines += ["", "**memstrata-mcp lost acknowledged stores in the pipelined run (N = " + ", ".join(map(str, bad))
                  + "). This is a bug.**"]
    return lines
