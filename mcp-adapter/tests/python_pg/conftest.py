"""Fixtures for memstrata-mcp over a PostgreSQL store: the test server's URL (from
scripts/pg-test.sh), one schema per test, `memstrata-mcp http` instances on it.

Run by scripts/test-mcp-pg.sh under scripts/pg-test.sh (`make test-pg`). Without
MEMSTRATA_TEST_PG_URL every test fails: the PostgreSQL suites never skip."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[3]
# Generous: the debug binary on a loaded 2-core machine can be slow; this is not a performance check.
TIMEOUT = 120


@pytest.fixture(scope="session")
def binary() -> str:
    """Path of the memstrata-mcp binary (scripts/test-mcp-pg.sh builds it and sets MEMSTRATA_MCP_BIN)."""
    path = os.environ.get("MEMSTRATA_MCP_BIN") or str(
        Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")) / "debug" / "memstrata-mcp"
    )
    if not os.access(path, os.X_OK):
        pytest.fail(f"memstrata-mcp binary not found at {path}; run `cargo build -p memstrata-mcp` first")
    return path


@pytest.fixture(scope="session")
def pg_url() -> str:
    url = os.environ.get("MEMSTRATA_TEST_PG_URL")
    if not url:
        pytest.fail("MEMSTRATA_TEST_PG_URL is not set: run through scripts/pg-test.sh (make test-pg)")
    return url


@pytest.fixture
def store(pg_url: str, request: pytest.FixtureRequest) -> str:
    """A store URL on a schema of its own (created by the first instance that opens it)."""
    name = request.node.name.removeprefix("test_")[:30]
    return f"{pg_url}?schema=t_{name}_{uuid.uuid4().hex[:8]}"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class Instance:
    url: str
    port: int
    proc: subprocess.Popen[bytes]
    log: Path

    def stderr(self) -> str:
        return self.log.read_text(errors="replace")


def start_http(binary: str, store: str, log: Path, *extra: str, cwd: Path | None = None) -> Instance:
    """Start `memstrata-mcp http` on `store` at a loopback port the kernel picks (`--listen
    127.0.0.1:0`: no port probed then released, which another process could take first) and
    wait until its log says where it listens."""
    out = log.open("wb")
    proc = subprocess.Popen(
        [binary, "--store", store, "http", "--listen", "127.0.0.1:0", *extra],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=out,
        cwd=cwd,
    )
    while True:
        # The server either prints its listening line or exits: no deadline to tune to the machine.
        m = re.search(r"listening on https?://127\.0\.0\.1:(\d+)/", log.read_text(errors="replace"))
        if m:
            port = int(m.group(1))
            break
        if proc.poll() is not None:
            raise RuntimeError(f"server exited early: {log.read_text(errors='replace')}")
        time.sleep(0.05)  # polling the log file for the line, not waiting for time to pass
    return Instance(url=f"http://127.0.0.1:{port}", port=port, proc=proc, log=log)


def stop(i: Instance) -> int:
    if i.proc.poll() is not None:
        return i.proc.returncode
    i.proc.send_signal(signal.SIGTERM)
    try:
        return i.proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        i.proc.kill()
        return i.proc.wait()


def stop_cleanly(i: Instance) -> None:
    """SIGTERM, and the server must exit 0. On failure the status comes first and then the
    end of the log (where a shutdown goes wrong), so a shortened report still shows both."""
    code = stop(i)
    if code != 0:
        status = f"signal {signal.Signals(-code).name}" if code < 0 else f"status {code}"
        tail = "".join(i.stderr().splitlines(keepends=True)[-40:])
        raise AssertionError(f"memstrata-mcp exited with {status} after SIGTERM; the end of its log:\n{tail}")


@pytest.fixture
def instances(binary: str, store: str, tmp_path: Path) -> Iterator[list[Instance]]:
    """Two `memstrata-mcp http` instances on different ports over one database and schema."""
    started: list[Instance] = []
    try:
        for name in ("a", "b"):
            started.append(start_http(binary, store, tmp_path / f"{name}.log"))
        yield started
    finally:
        for i in started:
            stop(i)


def execute(i: Instance, tool: str, params: dict[str, Any]) -> dict[str, Any]:
    """One call through the plain /mcp/v1/execute envelope; the result, or an AssertionError."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "execute", "params": {"tool": tool, "parameters": params}}
    r = httpx.post(f"{i.url}/mcp/v1/execute", json=body, timeout=TIMEOUT).json()
    assert "result" in r, f"{tool} via {i.url}: {r}"
    return r["result"]  # type: ignore[no-any-return]


def run_cli(binary: str, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([binary, *args], capture_output=True, text=True, timeout=300, cwd=cwd)
