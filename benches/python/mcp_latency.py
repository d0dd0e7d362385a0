"""MCP `tools/call` latency and throughput: memstrata-mcp over stdio, streamable
HTTP and WebSocket, and the reference `@modelcontextprotocol/server-memory`
(npm) over stdio, on the same entities and queries.

Run by scripts/bench.sh (with MCP_ONLY=transports,workload: the bounded load
table of `make bench` comes from the Rust client benches/src/bin/mcp_load/,
because one Python process driving every HTTP client was the bound of those rows):
    PYTHONPATH=<dir with websockets> .venv/bin/python mcp_latency.py \
        MEMSTRATA_MCP_BIN REFERENCE_INDEX_JS DATA.json OUT.md

One client, sequential calls (each waits for its answer), a fresh store per
target, a warm-up, then: WRITES entities (`knowledge_store` / `create_entities`),
READS them back by name (`knowledge_retrieve` / `open_nodes`) and SEARCHES one
word (`knowledge_query` limit 10 / `search_nodes`). stdio and HTTP go through
the official Python SDK (`mcp.Client`); the SDK has no WebSocket client, so the
WebSocket target speaks the same JSON-RPC frames with the `websockets` package.

Then an end-to-end workload on both servers over stdio: store N facts, then
search (N = 300 and 3000), with the SDK client and with a minimal raw JSON-RPC
client (`RawStdio`, also used by mcp_concurrency.py) that has none of the SDK's
per-call cost, and pipelined (16 requests in flight on one connection) with a
count afterwards of the facts each server actually kept.

Between the two, a bounded loopback load on memstrata-mcp alone: C = 8 clients at once against one
instance (stdio: `RawStdio` with 8 requests in flight on its one connection; WebSocket: 8 connections;
streamable HTTP: 8 SDK sessions, and 8 keep-alive httpx clients on `/mcp/v1/execute`), each sending its
next call only after the answer, for D = 10 s per transport of 20% writes / 60% reads / 20% searches, with
p50/p95/p99, calls/s, errors and lost writes set against issue #14's targets; plus a wide row of 64 httpx
clients, and every row again with the behaviour before soft search commits (MEMSTRATA_SEARCH_COMMIT=durable).
Environment: MCP_LOAD_SECONDS (D), MCP_LOAD_WARMUP_SECONDS (1), MCP_LOAD_CONCURRENCY (C),
MCP_LOAD_WIDE_CONCURRENCY (64), MCP_LOAD_BASELINE=soft|durable|soft,durable|0 (which before rows),
MCP_LOAD_JSON=FILE (the load rows as JSON, too); and
MCP_ONLY=transports,load,workload (comma-separated) to run only some parts.
Nothing here asserts on time.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mcpbench.data import WORDS
from mcpbench.figures import fmt_ns, pct
from mcpbench.load import load_json, load_markdown, run_load
from mcpbench.transports import N_READ, N_SEARCH, N_WRITE, WARMUP, entities, run_transports
from mcpbench.workload import run_workloads, workload_markdown


async def main() -> None:
    binary, ref_js, data_path, out_path = sys.argv[1:5]
    data = json.loads(Path(data_path).read_text())
    WORDS.extend(q.split()[0] for q in data["queries"])
    ents = entities(data)
    results: list[tuple[str, dict[str, list[int]]]] = []
    node = shutil.which("node")
    # MCP_ONLY=transports,load,workload (any of them, comma-separated) runs only those parts; default all.
    parts = {p.strip() for p in os.environ.get("MCP_ONLY", "transports,load,workload").split(",")}
    unknown = parts - {"transports", "load", "workload"}
    if unknown:
        raise SystemExit(f"MCP_ONLY: unknown part(s) {sorted(unknown)} (use transports, load, workload)")
    with tempfile.TemporaryDirectory() as tmp:
        tmpd = Path(tmp)
        if "transports" in parts:
            await run_transports(binary, ref_js, node, ents, tmpd, results)
        node_version = subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip() if node else "–"

        if "load" in parts:
            load_rows, load_s = await run_load(binary, data, tmpd)
            print(f"   mcp load: {load_s:.0f} s in all", file=sys.stderr)
            if os.environ.get("MCP_LOAD_JSON"):
                Path(os.environ["MCP_LOAD_JSON"]).write_text(json.dumps(load_json(load_rows), indent=1))

        if "workload" in parts:
            t = time.perf_counter()
            workloads = await run_workloads(binary, ref_js, node, data, tmpd)
            print(f"   mcp workload: {time.perf_counter() - t:.0f} s in all", file=sys.stderr)

    ref_pkg = Path(ref_js).parent.parent / "package.json"
    ref_version = json.loads(ref_pkg.read_text()).get("version", "?") if ref_pkg.exists() else "not installed"
    lines = [
        "## MCP `tools/call`: transports and the reference memory server\n",
        f"One client, sequential calls, fresh store per row; {N_WRITE} WRITES of an entity (name, type, three "
        f"observations of 8–50 words) — `knowledge_store` / `create_entities`; {N_READ} READS by name — "
        f"`knowledge_retrieve` / `open_nodes`; {N_SEARCH} one-word SEARCHES — `knowledge_query` (limit 10) / "
        f"`search_nodes`, after {WARMUP} warm-up searches. memstrata-mcp is the release build "
        f"(`Durability::Periodic`); the reference is `@modelcontextprotocol/server-memory` {ref_version} "
        f"on Node {node_version}, which keeps the graph in a JSON Lines file it re-reads and re-writes on "
        "every call. stdio and streamable HTTP use the official Python SDK client (`mcp.Client`); WebSocket "
        "uses raw JSON-RPC frames (the SDK has no WebSocket client); the `/mcp/v1/execute` row posts the plain "
        "envelope with a keep-alive `httpx` client (no MCP session), which isolates the server's HTTP cost "
        "from the SDK client's. calls/s = calls ÷ their summed latency.\n",
        "| server, transport | op | p50 | p95 | p99 | calls/s |",
        "|---|---|---|---|---|---|",
    ] if "transports" in parts else ["## MCP `tools/call`\n"]
    summary: dict[str, dict[str, float]] = {}
    for name, lat in results:
        for op, xs in lat.items():
            rate = len(xs) / (sum(xs) / 1e9)
            summary.setdefault(name, {})[op] = statistics.median(xs)
            lines.append(f"| {name} | {op} | {fmt_ns(pct(xs, 0.5))} | {fmt_ns(pct(xs, 0.95))} | "
                         f"{fmt_ns(pct(xs, 0.99))} | {rate:.0f} |")
    ref = next((v for k, v in summary.items() if k.startswith("reference")), None)
    if ref:
        lines.append("")
        lines.append("Median latency, reference ÷ memstrata-mcp (stdio, same client): " + ", ".join(
            f"{op} {ref[op] / summary['memstrata-mcp, stdio'][op]:.2f}×" for op in ("write", "read", "search")) + ".")
    lines.append("")
    if "load" in parts:
        lines += load_markdown(load_rows, load_s)
        lines.append("")
    if "workload" in parts:
        lines += workload_markdown(workloads, importlib.metadata.version("mcp"), ref_version, node_version)
    Path(out_path).write_text("\n".join(lines) + "\n\n")
    print("\n".join(lines))


if __name__ == "__main__":
    asyncio.run(main())
