"""One client, sequential calls, a fresh store per row: WRITES, READS and SEARCHES over each of
memstrata-mcp's transports (stdio, streamable HTTP, `/mcp/v1/execute`, WebSocket) and against the
reference `@modelcontextprotocol/server-memory` over stdio."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any, Awaitable, Callable

from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from mcpbench.clients import TIMEOUT, Call, checked, execute_caller, http_server, ws_session
from mcpbench.data import WORDS

WARMUP = 30
N_WRITE = 300
N_READ = 600
N_SEARCH = 300


def entities(data: dict[str, Any]) -> list[dict[str, Any]]:
    kinds = ["person", "project", "service", "decision", "incident", "tool"]
    kv = data["kv"]
    out = []
    for i in range(N_WRITE):
        obs = [kv[(i * 3 + j) % len(kv)][1]["text"] for j in range(3)]
        out.append({"name": f"entity-{i:04}", "entityType": kinds[i % len(kinds)], "observations": obs})
    return out


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


async def via_client(client: Client, ops: dict[str, Any]) -> dict[str, list[int]]:
    async with client as c:
        async def call(name: str, args: dict[str, Any]) -> Any:
            return checked(await c.call_tool(name, args), name)

        return await run_phases(call, ops)


async def via_websocket(url: str, ops: dict[str, Any]) -> dict[str, list[int]]:
    async with ws_session(url) as call:
        return await run_phases(call, ops)


async def via_execute(url: str, ops: dict[str, Any]) -> dict[str, list[int]]:
    """The plain JSON-RPC envelope on the same HTTP listener: the server's own HTTP cost, no MCP session."""
    import httpx

    async with httpx.AsyncClient(timeout=TIMEOUT) as http:
        return await run_phases(execute_caller(http, url), ops)


async def run_transports(binary: str, ref_js: str, node: str | None, ents: list[dict[str, Any]], tmpd: Path,
                         results: list[tuple[str, dict[str, list[int]]]]) -> None:
    print("   mcp: memstrata stdio", file=sys.stderr)
    params = StdioServerParameters(command=binary, args=["--store", str(tmpd / "stdio.mem"), "--no-audit", "stdio"])
    results.append(("memstrata-mcp, stdio", await via_client(Client(params, mode="legacy"), memstrata_ops(ents))))

    # The HTTP listener's three faces, each on a fresh server and store.
    http_rows: list[tuple[str, str, Callable[[int], Awaitable[dict[str, list[int]]]]]] = [
        ("memstrata-mcp, streamable HTTP", "http.mem",
         lambda port: via_client(Client(streamable_http_client(f"http://127.0.0.1:{port}/mcp"), mode="legacy"),
                                 memstrata_ops(ents))),
        ("memstrata-mcp, POST /mcp/v1/execute (httpx, keep-alive)", "execute.mem",
         lambda port: via_execute(f"http://127.0.0.1:{port}/mcp/v1/execute", memstrata_ops(ents))),
        ("memstrata-mcp, WebSocket", "ws.mem",
         lambda port: via_websocket(f"ws://127.0.0.1:{port}/mcp/ws", memstrata_ops(ents))),
    ]
    for label, store, run in http_rows:
        print(f"   mcp: {label}", file=sys.stderr)
        async with http_server(binary, tmpd / store) as port:
            results.append((label, await run(port)))

    if node and Path(ref_js).exists():
        print("   mcp: reference server-memory stdio", file=sys.stderr)
        env = {**os.environ, "MEMORY_FILE_PATH": str(tmpd / "reference-memory.jsonl")}
        params = StdioServerParameters(command=node, args=[ref_js], env=env)
        results.append(("reference server-memory (Node), stdio",
                        await via_client(Client(params, mode="legacy"), reference_ops(ents))))
