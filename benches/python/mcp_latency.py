"""MCP `tools/call` latency and throughput: memstrata-mcp over stdio, streamable
HTTP and WebSocket, and the reference `@modelcontextprotocol/server-memory`
(npm) over stdio, on the same entities and queries.

Run by scripts/bench.sh (with MCP_ONLY=transports,workload: the bounded load
table of `make bench` comes from the Rust client benches/src/bin/mcp_load.rs,
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
import logging
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable

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


@asynccontextmanager
async def ws_session(url: str, timeout: float = TIMEOUT) -> AsyncIterator[Call]:
    """One WebSocket connection, `initialize`d; yields a `tools/call` that returns the result (raises on error)."""
    import websockets

    async with websockets.connect(url, max_size=None) as ws:
        next_id = 0

        async def request(method: str, params: dict[str, Any]) -> Any:
            nonlocal next_id
            next_id += 1
            rid = next_id
            await ws.send(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}))
            while True:
                msg = json.loads(await asyncio.wait_for(ws.recv(), timeout))
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

        yield call


async def via_websocket(url: str, ops: dict[str, Any]) -> dict[str, list[int]]:
    async with ws_session(url) as call:
        return await run_phases(call, ops)


def execute_caller(http: Any, url: str) -> Call:
    """A `tools/call` over the plain `POST /mcp/v1/execute` envelope on an `httpx.AsyncClient` (raises on error)."""
    next_id = 0

    async def call(name: str, args: dict[str, Any]) -> Any:
        nonlocal next_id
        next_id += 1
        body = {"jsonrpc": "2.0", "id": next_id, "method": "execute", "params": {"tool": name, "parameters": args}}
        r = (await http.post(url, json=body)).json()
        if "error" in r:
            raise RuntimeError(f"{name}: {r['error']}")
        return r["result"]

    return call


async def via_execute(url: str, ops: dict[str, Any]) -> dict[str, list[int]]:
    """The plain JSON-RPC envelope on the same HTTP listener: the server's own HTTP cost, no MCP session."""
    import httpx

    async with httpx.AsyncClient(timeout=TIMEOUT) as http:
        return await run_phases(execute_caller(http, url), ops)


class RpcError(RuntimeError):
    """A JSON-RPC error answer, or the connection ending before the answer came."""


class RawStdio:
    """Minimal MCP client over stdio: newline-delimited JSON-RPC on asyncio subprocess pipes.

    No SDK: one reader task matches answers to requests by id, so any number of requests can be in
    flight on the one connection. Notifications from the server are read and dropped. The server's
    stderr goes to a file (a pipe nobody reads could fill up and block it); `stderr_text()` reads it.
    """

    def __init__(self, argv: list[str], env: dict[str, str] | None, stderr_path: Path) -> None:
        self.argv, self.env, self.stderr_path = argv, env, stderr_path
        self.proc: asyncio.subprocess.Process | None = None
        self.pending: dict[int, asyncio.Future[Any]] = {}
        self.next_id = 0
        self.reader: asyncio.Task[None] | None = None
        self.closed_reason: str | None = None

    async def start(self, timeout: float = TIMEOUT) -> dict[str, Any]:
        with open(self.stderr_path, "wb") as err:
            self.proc = await asyncio.create_subprocess_exec(
                *self.argv, env=self.env, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=err, limit=1 << 28)
        self.reader = asyncio.create_task(self._read())
        init = await self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                                 "clientInfo": {"name": "memstrata-bench", "version": "0"}}, timeout)
        await self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return init

    def stderr_text(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace").strip()
        except OSError:
            return ""

    async def _read(self) -> None:
        assert self.proc and self.proc.stdout
        try:
            while True:
                line = await self.proc.stdout.readline()
                if not line:
                    break
                try:
                    msg = json.loads(line)
                except ValueError:
                    continue
                rid = msg.get("id") if isinstance(msg, dict) else None
                fut = self.pending.pop(rid, None) if rid is not None and "method" not in msg else None
                if fut is not None and not fut.done():
                    fut.set_result(msg)
        except Exception as e:  # noqa: BLE001 - reported to every waiter below
            self.closed_reason = f"reading stdout failed: {e!r}"
        if self.closed_reason is None:
            self.closed_reason = "server closed stdout"
        for fut in self.pending.values():
            if not fut.done():
                fut.set_exception(RpcError(self.closed_reason))
        self.pending.clear()

    async def _send(self, msg: dict[str, Any]) -> None:
        assert self.proc and self.proc.stdin
        self.proc.stdin.write(json.dumps(msg).encode() + b"\n")
        await self.proc.stdin.drain()

    async def request(self, method: str, params: dict[str, Any], timeout: float = TIMEOUT) -> Any:
        if self.closed_reason is not None:
            raise RpcError(self.closed_reason)
        self.next_id += 1
        rid = self.next_id
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.pending[rid] = fut
        try:
            await self._send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        except (BrokenPipeError, ConnectionResetError) as e:
            self.pending.pop(rid, None)
            raise RpcError(f"server closed stdin: {e}") from None
        try:
            msg = await asyncio.wait_for(fut, timeout)
        finally:
            self.pending.pop(rid, None)
        if "error" in msg:
            raise RpcError(f"{method}: {msg['error']}")
        return msg["result"]

    async def call_tool(self, name: str, args: dict[str, Any], timeout: float = TIMEOUT) -> dict[str, Any]:
        """The `tools/call` result (check `isError`); raises RpcError on a protocol error."""
        return await self.request("tools/call", {"name": name, "arguments": args}, timeout)

    async def close(self, timeout: float = 60) -> int | None:
        """Close stdin (the stdio way to end a session), wait for the exit, kill after `timeout`."""
        if self.proc is None:
            return None
        if self.proc.stdin and not self.proc.stdin.is_closing():
            self.proc.stdin.close()
        try:
            await asyncio.wait_for(self.proc.wait(), timeout)
        except asyncio.TimeoutError:
            self.proc.kill()
            await self.proc.wait()
        if self.reader:
            await asyncio.wait_for(self.reader, 10)
        return self.proc.returncode


# ---- end-to-end workload: store N facts, then S searches ---------------------------------------

WORKLOAD_N = (300, 3000)
WORKLOAD_S = 300
WORKLOAD_WARMUP = 10
PIPELINE_DEPTH = 16

# (name, arguments) of call i.
Op = Callable[[int], tuple[str, dict[str, Any]]]
# A tools/call: (success, structured result or error text).
ToolCall = Callable[[str, dict[str, Any]], Awaitable[tuple[bool, Any]]]


def fact(data: dict[str, Any], i: int) -> dict[str, Any]:
    kinds = ["person", "project", "service", "decision", "incident", "tool"]
    kv = data["kv"]
    obs = [kv[(i * 3 + j) % len(kv)][1]["text"] for j in range(3)]
    return {"name": f"fact-{i:05}", "entityType": kinds[i % len(kinds)], "observations": obs}


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


# ---- bounded loopback load: C clients at once against one instance, a fixed mix, D seconds ------

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


class LogCount(logging.Handler):
    """Counts the SDK client's log records (first line of each, plus the exception type)
    instead of printing a traceback per session."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.seen: dict[str, int] = {}

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        msg = text.splitlines()[0] if text else record.levelname
        if record.exc_info and record.exc_info[0]:
            msg += f" ({record.exc_info[0].__module__}.{record.exc_info[0].__name__})"
        self.seen[msg] = self.seen.get(msg, 0) + 1


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
async def http_server(binary: str, store: Path) -> AsyncIterator[int]:
    proc, port = start_http(binary, store)
    try:
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


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


def pct(xs: list[int], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def fmt_ns(ns: float) -> str:
    if ns < 1_000_000:
        return f"{ns / 1e3:.0f} µs"
    if ns < 1_000_000_000:
        return f"{ns / 1e6:.2f} ms"
    return f"{ns / 1e9:.2f} s"


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
