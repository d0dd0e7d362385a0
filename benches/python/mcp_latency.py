"""MCP `tools/call` latency and throughput: memstrata-mcp over stdio, streamable
HTTP and WebSocket, and the reference `@modelcontextprotocol/server-memory`
(npm) over stdio, on the same entities and queries.

Run by scripts/bench.sh:
    PYTHONPATH=<dir with websockets> .venv/bin/python mcp_latency.py \
        MEMSTRATA_MCP_BIN REFERENCE_INDEX_JS DATA.json OUT.md

One client, sequential calls (each waits for its answer), a fresh store per
target, a warm-up, then: WRITES entities (`knowledge_store` / `create_entities`),
READS them back by name (`knowledge_retrieve` / `open_nodes`) and SEARCHES one
word (`knowledge_query` limit 10 / `search_nodes`). stdio and HTTP go through
the official Python SDK (`mcp.Client`); the SDK has no WebSocket client, so the
WebSocket target speaks the same JSON-RPC frames with the `websockets` package.
Nothing here asserts on time.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Awaitable, Callable

from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

WARMUP = 30
N_WRITE = 300
N_READ = 600
N_SEARCH = 300
TIMEOUT = 120

Call = Callable[[str, dict[str, Any]], Awaitable[Any]]


def entities(data: dict[str, Any]) -> list[dict[str, Any]]:
    kinds = ["person", "project", "service", "decision", "incident", "tool"]
    kv = data["kv"]
    out = []
    for i in range(N_WRITE):
        obs = [kv[(i * 3 + j) % len(kv)][1]["text"] for j in range(3)]
        out.append({"name": f"entity-{i:04}", "entityType": kinds[i % len(kinds)], "observations": obs})
    return out


def search_words(data: dict[str, Any]) -> list[str]:
    return [q.split()[0] for q in data["queries"]][:N_SEARCH] * (N_SEARCH // len(data["queries"][:N_SEARCH]) + 1)


def memstrata_ops(ents: list[dict[str, Any]]) -> dict[str, Callable[[int], tuple[str, dict[str, Any]]]]:
    return {
        "write": lambda i: ("knowledge_store", {"key": ents[i]["name"], "knowledge": {
            "entityType": ents[i]["entityType"], "observations": ents[i]["observations"]}}),
        "read": lambda i: ("knowledge_retrieve", {"key": ents[(i * 7919) % len(ents)]["name"]}),
        "search": lambda i: ("knowledge_query", {"text": WORDS[i % len(WORDS)], "limit": 10}),
    }


def reference_ops(ents: list[dict[str, Any]]) -> dict[str, Callable[[int], tuple[str, dict[str, Any]]]]:
    return {
        "write": lambda i: ("create_entities", {"entities": [ents[i]]}),
        "read": lambda i: ("open_nodes", {"names": [ents[(i * 7919) % len(ents)]["name"]]}),
        "search": lambda i: ("search_nodes", {"query": WORDS[i % len(WORDS)]}),
    }


WORDS: list[str] = []


async def run_phases(call: Call, ops: dict[str, Callable[[int], tuple[str, dict[str, Any]]]]) -> dict[str, list[int]]:
    # Warm-up: a few reads of absent names and searches (no writes, so the data is the same everywhere).
    for i in range(WARMUP):
        name, args = ops["search"](i)
        await call(name, args)
    lat: dict[str, list[int]] = {}
    for phase, n in (("write", N_WRITE), ("read", N_READ), ("search", N_SEARCH)):
        ts = []
        for i in range(n):
            name, args = ops[phase](i)
            t = time.perf_counter_ns()
            await call(name, args)
            ts.append(time.perf_counter_ns() - t)
        lat[phase] = ts
    return lat


def checked(r: Any, name: str) -> Any:
    if getattr(r, "is_error", False):
        raise RuntimeError(f"{name} failed: {r.content}")
    return r


async def via_client(client: Client, ops: dict[str, Any]) -> dict[str, list[int]]:
    async with client as c:
        async def call(name: str, args: dict[str, Any]) -> Any:
            return checked(await c.call_tool(name, args), name)

        return await run_phases(call, ops)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_http(binary: str, store: Path) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    proc = subprocess.Popen(
        [binary, "--store", str(store), "--no-audit", "http", "--listen", f"127.0.0.1:{port}"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60  # readiness wait only
    while True:
        if proc.poll() is not None:
            raise RuntimeError("memstrata-mcp http exited early")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return proc, port
        except OSError:
            if time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError("memstrata-mcp http did not start")
            time.sleep(0.05)


async def via_websocket(url: str, ops: dict[str, Any]) -> dict[str, list[int]]:
    import websockets

    async with websockets.connect(url, max_size=None) as ws:
        next_id = 0

        async def request(method: str, params: dict[str, Any]) -> Any:
            nonlocal next_id
            next_id += 1
            rid = next_id
            await ws.send(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}))
            while True:
                msg = json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT))
                if msg.get("id") == rid:
                    if "error" in msg:
                        raise RuntimeError(f"{method}: {msg['error']}")
                    return msg["result"]

        await request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                     "clientInfo": {"name": "memstrata-bench", "version": "0"}})
        await ws.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))

        async def call(name: str, args: dict[str, Any]) -> Any:
            r = await request("tools/call", {"name": name, "arguments": args})
            if r.get("isError"):
                raise RuntimeError(f"{name} failed: {r}")
            return r

        return await run_phases(call, ops)


async def via_execute(url: str, ops: dict[str, Any]) -> dict[str, list[int]]:
    """The plain JSON-RPC envelope on the same HTTP listener: the server's own HTTP cost, no MCP session."""
    import httpx

    async with httpx.AsyncClient(timeout=TIMEOUT) as http:
        next_id = 0

        async def call(name: str, args: dict[str, Any]) -> Any:
            nonlocal next_id
            next_id += 1
            body = {"jsonrpc": "2.0", "id": next_id, "method": "execute", "params": {"tool": name, "parameters": args}}
            r = (await http.post(url, json=body)).json()
            if "error" in r:
                raise RuntimeError(f"{name}: {r['error']}")
            return r["result"]

        return await run_phases(call, ops)


def pct(xs: list[int], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def fmt_ns(ns: float) -> str:
    if ns < 1_000_000:
        return f"{ns / 1e3:.0f} µs"
    if ns < 1_000_000_000:
        return f"{ns / 1e6:.2f} ms"
    return f"{ns / 1e9:.2f} s"


async def main() -> None:
    binary, ref_js, data_path, out_path = sys.argv[1:5]
    data = json.loads(Path(data_path).read_text())
    WORDS.extend(q.split()[0] for q in data["queries"])
    ents = entities(data)
    results: list[tuple[str, dict[str, list[int]]]] = []
    node = shutil.which("node")
    with tempfile.TemporaryDirectory() as tmp:
        tmpd = Path(tmp)
        print("   mcp: memstrata stdio", file=sys.stderr)
        params = StdioServerParameters(command=binary, args=["--store", str(tmpd / "stdio.mem"), "--no-audit", "stdio"])
        results.append(("memstrata-mcp, stdio", await via_client(Client(params, mode="legacy"), memstrata_ops(ents))))

        print("   mcp: memstrata streamable HTTP", file=sys.stderr)
        proc, port = start_http(binary, tmpd / "http.mem")
        try:
            client = Client(streamable_http_client(f"http://127.0.0.1:{port}/mcp"), mode="legacy")
            results.append(("memstrata-mcp, streamable HTTP", await via_client(client, memstrata_ops(ents))))
        finally:
            proc.terminate()
            proc.wait(timeout=60)

        print("   mcp: memstrata HTTP execute envelope", file=sys.stderr)
        proc, port = start_http(binary, tmpd / "execute.mem")
        try:
            results.append(("memstrata-mcp, POST /mcp/v1/execute (httpx, keep-alive)",
                            await via_execute(f"http://127.0.0.1:{port}/mcp/v1/execute", memstrata_ops(ents))))
        finally:
            proc.terminate()
            proc.wait(timeout=60)

        print("   mcp: memstrata WebSocket", file=sys.stderr)
        proc, port = start_http(binary, tmpd / "ws.mem")
        try:
            results.append(("memstrata-mcp, WebSocket", await via_websocket(f"ws://127.0.0.1:{port}/mcp/ws",
                                                                           memstrata_ops(ents))))
        finally:
            proc.terminate()
            proc.wait(timeout=60)

        if node and Path(ref_js).exists():
            print("   mcp: reference server-memory stdio", file=sys.stderr)
            env = {**os.environ, "MEMORY_FILE_PATH": str(tmpd / "reference-memory.jsonl")}
            params = StdioServerParameters(command=node, args=[ref_js], env=env)
            results.append(("reference server-memory (Node), stdio",
                            await via_client(Client(params, mode="legacy"), reference_ops(ents))))
        node_version = subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip() if node else "–"

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
    ]
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
    Path(out_path).write_text("\n".join(lines) + "\n\n")
    print("\n".join(lines))


if __name__ == "__main__":
    asyncio.run(main())
