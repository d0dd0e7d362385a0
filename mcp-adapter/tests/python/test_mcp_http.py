"""The official Python MCP SDK (and plain httpx) against `memstrata-mcp http`:
streamable HTTP at /mcp, the /mcp/v1/execute envelope, auth, Host/Origin checks, limits, audit."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import HttpServer, stop
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

pytestmark = pytest.mark.anyio

ADMIN = "admin-key-0123456789"
PROJ = "proj-key-0123456789"
CLI_KEY = "cli-key-0123456789"
# Generous: the debug binary on a loaded 2-core machine can be slow; this is not a performance check.
TIMEOUT = 120


def connect(server: HttpServer, key: str | None = None, mode: str = "legacy") -> Client:
    headers = {"Authorization": f"Bearer {key}"} if key else None
    transport = streamable_http_client(f"{server.url}/mcp", http_client=create_mcp_http_client(headers=headers))
    return Client(transport, mode=mode)


async def ok(c: Client, name: str, args: dict[str, Any]) -> dict[str, Any]:
    r = await c.call_tool(name, args)
    assert not r.is_error, f"{name}: {r.content}"
    return r.structured_content  # type: ignore[return-value]


async def err(c: Client, name: str, args: dict[str, Any]) -> str:
    r = await c.call_tool(name, args)
    assert r.is_error, f"{name} should fail: {r.structured_content}"
    return r.content[0].text  # type: ignore[union-attr]


def execute(server: HttpServer, tool: str, params: dict[str, Any], key: str | None = None, rid: Any = 1) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    body = {"jsonrpc": "2.0", "id": rid, "method": "execute", "params": {"tool": tool, "parameters": params}}
    return httpx.post(f"{server.url}/mcp/v1/execute", json=body, headers=headers, timeout=TIMEOUT)


async def test_workflow_over_streamable_http(http_server: HttpServer) -> None:
    async with connect(http_server) as c:
        tools = await c.list_tools()
        assert len(tools.tools) == 34
        sid = (await ok(c, "session_create", {"name": "http"}))["session_id"]
        await ok(c, "session_save", {"session_id": sid, "content": {"n": 1}})
        await ok(c, "session_save", {"session_id": sid, "content": {"n": 2}})
        assert (await ok(c, "session_restore", {"session_id": sid}))["content"] == {"n": 2}
        assert (await ok(c, "session_restore", {"session_id": sid, "version": 1}))["content"] == {"n": 1}
        # The HTTP session keeps this connection's active context across requests.
        await ok(c, "context_switch", {"target_context": "web"})
        await ok(c, "context_store", {"key": "k", "value": [1, 2, 3]})
        assert (await ok(c, "context_retrieve", {"key": "k", "namespace": "web"}))["value"] == [1, 2, 3]
        e = await ok(c, "episode_record", {"summary": "Served over HTTP", "tags": ["http"]})
        hits = await ok(c, "episode_search", {"query": "HTTP", "tags": ["http"]})
        assert hits["hits"][0]["episode"]["id"] == e["id"]
        await ok(c, "knowledge_store", {"key": "proto", "knowledge": {"transport": "streamable-http"}})
        assert (await ok(c, "knowledge_query", {"text": "streamable"}))["hits"][0]["key"] == "proto"
        pin = await ok(c, "llm_punch_in", {"llm_name": "gpt", "task_description": "http test"})
        await ok(c, "llm_punch_out", {"task_id": pin["task_id"], "summary": "ok"})
        assert (await ok(c, "system_status", {}))["status"] == "healthy"
        await ok(c, "memory_optimize", {})
        msg = await err(c, "memory_store", {"key": "k"})
        assert msg.startswith("INVALID_INPUT:") and "value" in msg
        with pytest.raises(MCPError):
            await c.call_tool("no_such_tool", {})


async def test_stateless_modern_protocol(http_server: HttpServer) -> None:
    # mode="auto" discovers the 2026-07-28 protocol: every request stands alone.
    async with connect(http_server, mode="auto") as c:
        await ok(c, "memory_store", {"key": "k", "value": "v", "namespace": "modern"})
        assert (await ok(c, "memory_retrieve", {"key": "k", "namespace": "modern"}))["value"] == "v"
        assert (await ok(c, "system_status", {}))["status"] == "healthy"


def test_execute_envelope(http_server: HttpServer) -> None:
    r = execute(http_server, "memory_store", {"key": "env", "value": {"a": 1}}, rid="x-1")
    assert r.status_code == 200
    body = r.json()
    assert body["jsonrpc"] == "2.0" and body["id"] == "x-1" and body["result"]["success"] is True
    r = execute(http_server, "memory_retrieve", {"key": "env"})
    assert r.json()["result"]["value"] == {"a": 1}
    sid = execute(http_server, "session_create", {"name": "env"}).json()["result"]["session_id"]
    r = execute(http_server, "session_restore", {"session_id": sid})
    assert r.json()["error"]["data"]["code"] == "NOT_FOUND"
    r = execute(http_server, "no_such_tool", {})
    assert r.json()["error"]["code"] == -32601
    r = execute(http_server, "memory_store", {"value": 1})
    assert r.json()["error"]["code"] == -32602 and "key" in r.json()["error"]["message"]
    r = httpx.post(f"{http_server.url}/mcp/v1/execute", content=b"{not json", headers={"Content-Type": "application/json"}, timeout=TIMEOUT)
    assert r.status_code == 400 and r.json()["error"]["code"] == -32700
    r = httpx.post(f"{http_server.url}/mcp/v1/execute", json={"jsonrpc": "2.0", "id": 1, "method": "run", "params": {}}, timeout=TIMEOUT)
    assert r.json()["error"]["code"] == -32601


def test_request_size_limit(http_server: HttpServer) -> None:
    big = {"jsonrpc": "2.0", "id": 1, "method": "execute",
           "params": {"tool": "memory_store", "parameters": {"key": "big", "value": "x" * (24 * 1024 * 1024)}}}  # fmt: skip
    r = httpx.post(f"{http_server.url}/mcp/v1/execute", json=big, timeout=TIMEOUT)
    assert r.status_code == 413
    # Just above the value limit but within the body limit: the engine refuses it.
    r = execute(http_server, "memory_store", {"key": "big", "value": "x" * (16 * 1024 * 1024 + 10)})
    assert r.json()["error"]["data"]["code"] == "LIMIT_EXCEEDED"


def test_dns_rebinding_protection(http_server: HttpServer) -> None:
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}  # fmt: skip
    hdrs = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    evil = httpx.post(f"{http_server.url}/mcp", json=init, headers={**hdrs, "Host": "evil.example.com"}, timeout=TIMEOUT)
    assert evil.status_code == 403
    spoofed = httpx.post(f"{http_server.url}/mcp", json=init, headers={**hdrs, "Origin": "http://evil.example.com"}, timeout=TIMEOUT)
    assert spoofed.status_code == 403
    r = execute(http_server, "system_status", {})
    assert r.status_code == 200
    r = httpx.post(
        f"{http_server.url}/mcp/v1/execute",
        json={"jsonrpc": "2.0", "id": 1, "method": "execute", "params": {"tool": "system_status"}},
        headers={"Origin": "https://attacker.test"},
        timeout=TIMEOUT,
    )
    assert r.status_code == 403
    good = httpx.post(f"{http_server.url}/mcp", json=init, headers={**hdrs, "Origin": f"http://localhost:{http_server.port}"}, timeout=TIMEOUT)
    assert good.status_code == 200


async def test_api_keys(auth_server: HttpServer) -> None:
    # No key / wrong key: 401 on every endpoint.
    assert execute(auth_server, "system_status", {}).status_code == 401
    r = execute(auth_server, "system_status", {}, key="wrong-key-0000000")
    assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Bearer")
    r = httpx.post(f"{auth_server.url}/mcp", json={}, headers={"Accept": "application/json, text/event-stream"}, timeout=TIMEOUT)
    assert r.status_code == 401
    with pytest.raises(Exception):
        async with connect(auth_server, key="wrong-key-0000000") as c:
            await c.list_tools()
    # Full-access keys (config file and --api-key).
    assert execute(auth_server, "session_create", {"name": "x"}, key=ADMIN).json()["result"]["session_id"]
    assert execute(auth_server, "system_status", {}, key=CLI_KEY).json()["result"]["status"] == "healthy"
    # A restricted key: writes proj-*, reads shared, nothing engine-wide.
    async with connect(auth_server, key=PROJ) as c:
        await ok(c, "memory_store", {"key": "k", "value": 1, "namespace": "proj-a"})
        await ok(c, "memory_retrieve", {"key": "k", "namespace": "shared"})
        msg = await err(c, "memory_store", {"key": "k", "value": 1, "namespace": "shared"})
        assert msg.startswith("FORBIDDEN:") and "proj-bot" in msg
        msg = await err(c, "memory_retrieve", {"key": "k", "namespace": "secret"})
        assert msg.startswith("FORBIDDEN:")
        assert (await err(c, "session_create", {"name": "nope"})).startswith("FORBIDDEN:")
        assert (await err(c, "context_switch", {"target_context": "secret"})).startswith("FORBIDDEN:")
        # Resources follow the same rules: engine-wide status is not listed for this key.
        uris = {r.uri for r in (await c.list_resources()).resources}
        assert "memstrata://status" not in uris
        with pytest.raises(MCPError):
            await c.read_resource("memstrata://status")
    r = execute(auth_server, "memory_store", {"key": "k", "value": 1, "namespace": "other"}, key=PROJ)
    assert r.status_code == 403 and r.json()["error"]["data"]["code"] == "FORBIDDEN"


def test_audit_trail_and_status_command(binary: str, auth_server: HttpServer) -> None:
    execute(auth_server, "memory_store", {"key": "a", "value": 1, "namespace": "proj-x"}, key=PROJ)
    execute(auth_server, "memory_store", {"key": "a", "value": 1, "namespace": "nope"}, key=PROJ)
    execute(auth_server, "knowledge_store", {"key": "fact", "knowledge": 1}, key=ADMIN)
    # While the server holds the store, `status` still shows the audit trail.
    busy = subprocess.run([binary, "--store", str(auth_server.store), "status"], capture_output=True, text=True, check=True)
    assert "status: unavailable" in busy.stdout and "locked" in busy.stdout and "knowledge_store" in busy.stdout
    assert stop(auth_server) == 0
    lines = [json.loads(line) for line in (auth_server.store / "audit.jsonl").read_text().splitlines()]
    assert {"who": "proj-bot", "tool": "memory_store", "context": "proj-x", "ok": True}.items() <= lines[0].items()
    assert lines[1]["ok"] is False and lines[1]["error"] == "FORBIDDEN" and lines[1]["context"] == "nope"
    assert lines[2]["who"] == "admin" and lines[2]["transport"] == "execute"
    out = subprocess.run([binary, "--store", str(auth_server.store), "status"], capture_output=True, text=True, check=True)
    assert "status: healthy" in out.stdout
    assert "proj-bot" in out.stdout and "knowledge_store" in out.stdout and "FORBIDDEN" in out.stdout
    js = subprocess.run([binary, "--store", str(auth_server.store), "status", "--json"], capture_output=True, text=True, check=True)
    assert json.loads(js.stdout)["audit"][-1]["tool"] == "knowledge_store"


def test_remote_bind_needs_a_key(binary: str, tmp_path: Path) -> None:
    # Port 0: the refusal comes before any bind, and no port is probed then released.
    r = subprocess.run(
        [binary, "--store", str(tmp_path / "r.mem"), "http", "--listen", "0.0.0.0:0"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode != 0 and "API key" in r.stderr and r.stdout == ""


def test_admin_export_import_optimize(binary: str, tmp_path: Path) -> None:
    src = tmp_path / "src.mem"
    # Seed through the envelope-free path: a stdio-less admin round trip via import of a knowledge graph.
    kg = tmp_path / "memory.jsonl"
    kg.write_text(
        json.dumps({"type": "entity", "name": "Alice", "entityType": "person", "observations": ["likes tea"]}) + "\n"
        + json.dumps({"type": "relation", "from": "Alice", "to": "Bob", "relationType": "knows"}) + "\n"
    )  # fmt: skip
    run = lambda *a: subprocess.run([binary, *a], capture_output=True, text=True, timeout=120)  # noqa: E731
    r = run("--store", str(src), "import", str(kg), "--knowledge-graph")
    assert r.returncode == 0, r.stderr
    out = tmp_path / "export.jsonl"
    r = run("--store", str(src), "export", str(out))
    assert r.returncode == 0, r.stderr
    assert "Alice" in out.read_text()
    dst = tmp_path / "dst.mem"
    r = run("--store", str(dst), "import", str(out))
    assert r.returncode == 0, r.stderr
    r = run("--store", str(dst), "optimize", "--level", "aggressive")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["success"] is True
    r = run("--store", str(dst), "status", "--json")
    assert json.loads(r.stdout)["status"]["metrics"]["items"]["semantic"] >= 1
    # Read-only admin commands do not create a store by accident.
    r = run("--store", str(tmp_path / "missing.mem"), "status")
    assert r.returncode != 0 and "no store" in r.stderr and not (tmp_path / "missing.mem").exists()


async def test_resource_subscription_over_http(http_server: HttpServer) -> None:
    import anyio
    import mcp_types

    updated: list[str] = []
    got = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, mcp_types.ResourceUpdatedNotification):
            updated.append(str(message.params.uri))
            got.set()

    headers = None
    transport = streamable_http_client(f"{http_server.url}/mcp", http_client=create_mcp_http_client(headers=headers))
    async with Client(transport, mode="legacy", message_handler=on_message) as c:
        await ok(c, "knowledge_store", {"key": "watched", "knowledge": {"v": 1}})
        await c.subscribe_resource("memstrata://knowledge/watched")
        # Another client (the plain envelope) changes it: this session is told.
        r = execute(http_server, "knowledge_update", {"key": "watched", "patch": {"v": 2}})
        assert r.json()["result"]["version"] == 2
        with anyio.fail_after(30):  # turns a lost notification into a failure instead of a hang
            await got.wait()
        assert updated == ["memstrata://knowledge/watched"]
        await c.unsubscribe_resource("memstrata://knowledge/watched")


def test_api_keys_from_environment(binary: str, tmp_path: Path) -> None:
    from conftest import start_http

    s = start_http(binary, tmp_path / "env.mem", env={"MEMSTRATA_API_KEYS": "env-key-one-0000,env-key-two-0000"})
    try:
        assert execute(s, "system_status", {}).status_code == 401
        assert execute(s, "system_status", {}, key="env-key-two-0000").json()["result"]["status"] == "healthy"
    finally:
        assert stop(s) == 0
