"""Ways to call memstrata-mcp besides the SDK's own: a `tools/call` over WebSocket frames, over the
`/mcp/v1/execute` envelope, and over stdio with the raw JSON-RPC client `RawStdio`; an HTTP server on a
fresh store; a handler that counts the SDK client's log records."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import subprocess
import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable

TIMEOUT = 120

Call = Callable[[str, dict[str, Any]], Awaitable[Any]]


def checked(r: Any, name: str) -> Any:
    if getattr(r, "is_error", False):
        raise RuntimeError(f"{name} failed: {r.content}")
    return r


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
