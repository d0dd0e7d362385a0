"""Fixtures: the built memstrata-mcp binary, temporary stores, a running HTTP server."""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="session")
def binary() -> str:
    """Path of the memstrata-mcp binary (scripts/test-mcp.sh builds it and sets MEMSTRATA_MCP_BIN)."""
    path = os.environ.get("MEMSTRATA_MCP_BIN") or str(
        Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")) / "debug" / "memstrata-mcp"
    )
    if not os.access(path, os.X_OK):
        pytest.fail(f"memstrata-mcp binary not found at {path}; run `cargo build -p memstrata-mcp` first")
    return path


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class HttpServer:
    url: str
    port: int
    store: Path
    proc: subprocess.Popen[bytes]
    # The stderr lines read while waiting for the listening line.
    head: str = ""

    def stderr(self) -> str:
        return self.head + (self.proc.stderr.read().decode() if self.proc.stderr else "")


def start_http(binary: str, store: Path, *extra: str, env: dict[str, str] | None = None) -> HttpServer:
    """Start `memstrata-mcp http` on a loopback port the kernel picks (`--listen 127.0.0.1:0`: no
    port probed then released, which another process could take first) and wait for the line
    where it says which port it listens on."""
    proc = subprocess.Popen(
        [binary, "--store", str(store), "http", "--listen", "127.0.0.1:0", *extra],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, **(env or {})},
    )
    assert proc.stderr is not None
    head = []
    while True:
        # Blocks until the server prints a line or exits (EOF): no deadline to tune to the machine.
        line = proc.stderr.readline().decode(errors="replace")
        if not line:
            proc.wait()
            raise RuntimeError(f"server exited before listening: {''.join(head)}")
        head.append(line)
        m = re.search(r"listening on https?://127\.0\.0\.1:(\d+)/", line)
        if m:
            port = int(m.group(1))
            break
    return HttpServer(url=f"http://127.0.0.1:{port}", port=port, store=store, proc=proc, head="".join(head))


def stop(server: HttpServer) -> int:
    server.proc.terminate()
    try:
        return server.proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        server.proc.kill()
        return server.proc.wait()


@pytest.fixture
def http_server(binary: str, tmp_path: Path) -> Iterator[HttpServer]:
    """An unauthenticated loopback server."""
    s = start_http(binary, tmp_path / "http.mem")
    yield s
    stop(s)


AUTH_TOML = """
[[keys]]
id = "admin"
key = "admin-key-0123456789"
read = ["*"]
write = ["*"]
global = "write"

[[keys]]
id = "proj-bot"
key = "proj-key-0123456789"
read = ["shared"]
write = ["proj-*"]
global = "none"
"""


@pytest.fixture
def auth_server(binary: str, tmp_path: Path) -> Iterator[HttpServer]:
    """A server with two keys from a TOML auth config plus one --api-key."""
    cfg = tmp_path / "keys.toml"
    cfg.write_text(AUTH_TOML)
    s = start_http(binary, tmp_path / "auth.mem", "--auth-config", str(cfg), "--api-key", "cli-key-0123456789")
    yield s
    stop(s)
