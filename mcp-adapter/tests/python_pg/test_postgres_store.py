"""memstrata-mcp on a postgres:// store: the tools over streamable HTTP (official MCP SDK),
the admin commands (status, export, import), moving a store between sled and PostgreSQL
losslessly, and where the audit trail goes."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import TIMEOUT, run_cli, start_http, stop, stop_cleanly
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

pytestmark = pytest.mark.anyio


def connect(url: str) -> Client:
    return Client(streamable_http_client(f"{url}/mcp"), mode="legacy")


async def ok(c: Client, name: str, args: dict[str, Any]) -> dict[str, Any]:
    r = await c.call_tool(name, args)
    assert not r.is_error, f"{name}: {r.content}"
    return r.structured_content  # type: ignore[return-value]


def records(export: Path) -> list[dict[str, Any]]:
    """The records of an export file, without its header (which carries the export time)."""
    lines = [json.loads(line) for line in export.read_text().splitlines() if line.strip()]
    assert lines[0]["type"] == "memstrata_export", lines[0]
    return sorted(lines[1:], key=lambda r: json.dumps(r, sort_keys=True))


async def test_tools_and_admin_commands(binary: str, store: str, pg_url: str, tmp_path: Path) -> None:
    password = pg_url.split("@", 1)[0].rsplit(":", 1)[1]
    server = start_http(binary, store, tmp_path / "server.log", cwd=tmp_path)
    try:
        async with connect(server.url) as c:
            sid = (await ok(c, "session_create", {"name": "pg"}))["session_id"]
            await ok(c, "session_save", {"session_id": sid, "content": {"n": 1}})
            await ok(c, "session_save", {"session_id": sid, "content": {"n": 2}})
            assert (await ok(c, "session_restore", {"session_id": sid, "version": 1}))["content"] == {"n": 1}
            await ok(c, "context_switch", {"target_context": "web"})
            await ok(c, "context_store", {"key": "k", "value": [1, 2, 3]})
            e = await ok(c, "episode_record", {"summary": "Served from PostgreSQL", "tags": ["pg"]})
            hits = await ok(c, "episode_search", {"query": "PostgreSQL", "tags": ["pg"]})
            assert hits["hits"][0]["episode"]["id"] == e["id"]
            await ok(c, "knowledge_store", {"key": "db", "knowledge": {"engine": "postgres"}})
            assert (await ok(c, "knowledge_update", {"key": "db", "patch": {"v": 15}}))["version"] == 2
            assert (await ok(c, "knowledge_query", {"text": "postgres"}))["hits"][0]["key"] == "db"
            await ok(c, "memory_store", {"key": "short", "value": {"x": 1}})
            await ok(c, "working_focus", {"item": "look at the index log"})
            await ok(c, "procedure_learn", {"name": "p", "steps": [{"id": "q", "action": "ask_user"}]})
            pin = await ok(c, "llm_punch_in", {"llm_name": "gpt", "task_description": "pg test"})
            await ok(c, "llm_punch_out", {"task_id": pin["task_id"], "summary": "ok"})
            assert (await ok(c, "system_status", {}))["status"] == "healthy"
            await ok(c, "memory_optimize", {})
    finally:
        stop_cleanly(server)
    log = server.stderr()
    assert "audit trail off" in log and "--audit-file" in log, log
    assert password not in log, "the server logged the database password"
    # A URL is a store, not a path: nothing appears in the working directory.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["server.log"]

    r = run_cli(binary, "--store", store, "status", "--json")
    assert r.returncode == 0, r.stderr
    st = json.loads(r.stdout)
    items = st["status"]["metrics"]["items"]
    # Two episodes: the one recorded, and the one punch-out records.
    assert (items["episodes"], items["semantic"], items["sessions"], items["procedures"]) == (2, 1, 1, 1)
    assert st["audit"] == [] and st["audit_file"] is None
    assert password not in r.stdout + r.stderr and "***" in st["store"]

    # postgres -> sled -> another postgres schema -> export: the same records each time.
    pg_export = tmp_path / "pg.jsonl"
    r = run_cli(binary, "--store", store, "export", str(pg_export))
    assert r.returncode == 0, r.stderr
    sled = tmp_path / "moved.mem"
    r = run_cli(binary, "--store", str(sled), "import", str(pg_export))
    assert r.returncode == 0, r.stderr
    sled_export = tmp_path / "sled.jsonl"
    r = run_cli(binary, "--store", str(sled), "export", str(sled_export))
    assert r.returncode == 0, r.stderr
    assert records(sled_export) == records(pg_export)
    back = f"{store}_back"
    r = run_cli(binary, "--store", back, "import", str(sled_export))
    assert r.returncode == 0, r.stderr
    back_export = tmp_path / "back.jsonl"
    r = run_cli(binary, "--store", back, "export", str(back_export))
    assert r.returncode == 0, r.stderr
    assert records(back_export) == records(pg_export)
    kinds = {rec.get("type") for rec in records(pg_export)}
    assert {"episode", "knowledge", "session", "procedure", "task"} <= kinds, kinds

    # The admin commands that only read refuse a schema that does not exist.
    r = run_cli(binary, "--store", f"{store}_missing", "status")
    assert r.returncode != 0 and "has no schema" in r.stderr, r.stderr


async def test_audit_file_for_a_postgres_store(binary: str, store: str, tmp_path: Path) -> None:
    trail = tmp_path / "audit-a.jsonl"
    server = start_http(binary, store, tmp_path / "server.log", "--audit-file", str(trail))
    try:
        async with connect(server.url) as c:
            await ok(c, "knowledge_store", {"key": "k", "knowledge": "audited"})
            r = await c.call_tool("knowledge_update", {"key": "missing", "patch": {"a": 1}})
            assert r.is_error
    finally:
        stop_cleanly(server)
    entries = [json.loads(line) for line in trail.read_text().splitlines()]
    assert [(e["tool"], e["ok"]) for e in entries] == [("knowledge_store", True), ("knowledge_update", False)]
    assert entries[1]["error"] == "NOT_FOUND"
    # status shows the trail of the file it is given.
    r = run_cli(binary, "--store", store, "--audit-file", str(trail), "status")
    assert r.returncode == 0, r.stderr
    assert f"in {trail}" in r.stdout and "knowledge_store" in r.stdout, r.stdout


async def test_a_signal_while_a_session_is_open_exits_cleanly(binary: str, store: str, tmp_path: Path) -> None:
    """SIGTERM while a client's session is still open (a user stopping the server under a
    connected client). The session's tasks then hold the last handle of the store while the
    server's runtime shuts down; closing the PostgreSQL connections there aborted the process
    (SIGABRT in 2 of 9 runs of this test before the fix; core/tests/pg_backend/async_drop.rs
    checks the cause every time)."""
    server = start_http(binary, store, tmp_path / "server.log", cwd=tmp_path)
    client = connect(server.url)
    try:
        c = await client.__aenter__()
        await ok(c, "knowledge_store", {"key": "k", "knowledge": "kept"})
        stop_cleanly(server)
    finally:
        stop(server)
        # The server is gone, so ending the session fails; that is not what this test checks.
        with contextlib.suppress(Exception):
            await client.__aexit__(None, None, None)
    r = run_cli(binary, "--store", store, "export", str(tmp_path / "after.jsonl"))
    assert r.returncode == 0, r.stderr
    assert [x["key"] for x in records(tmp_path / "after.jsonl") if x.get("type") == "knowledge"] == ["k"]


def test_store_from_environment(binary: str, store: str, tmp_path: Path) -> None:
    # MEMSTRATA_STORE takes the same URL as --store.
    env = {**os.environ, "MEMSTRATA_STORE": store}
    r = subprocess.run(
        [binary, "import", "/dev/stdin"],
        input='{"type":"memstrata_export","format_version":1,"engine_version":"0.1.0","exported_at":"2026-01-01T00:00:00Z"}\n'
        '{"type":"knowledge","context":"default","key":"from-env","knowledge":"yes","version":1,'
        '"created_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-01T00:00:00Z",'
        '"history":[{"knowledge":"yes","recorded_at":"2026-01-01T00:00:00Z","version":1}]}\n',
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=TIMEOUT,
    )
    assert r.returncode == 0, r.stderr
    r = subprocess.run([binary, "export", "-"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    assert '"key":"from-env"' in r.stdout
    assert list(tmp_path.iterdir()) == []


async def test_a_password_parameter_never_shows_in_logs_or_the_audit_trail(
    binary: str, store: str, tmp_path: Path
) -> None:
    # The test URL's password moves to a `password=` parameter.
    scheme, rest = store.split("://", 1)
    user, host = rest.split("@", 1)
    user, password = user.split(":", 1)
    url = f"{scheme}://{user}@{host}&password={password}"
    audit = tmp_path / "audit.jsonl"
    server = start_http(binary, url, tmp_path / "server.log", "--audit-file", str(audit), cwd=tmp_path)
    try:
        async with connect(server.url) as c:
            await ok(c, "knowledge_store", {"key": "db", "knowledge": {"engine": "postgres"}})
            await ok(c, "episode_record", {"summary": "audited write"})
    finally:
        stop_cleanly(server)
    log = server.stderr()
    assert "password=***" in log, log
    trail = audit.read_text()
    assert "knowledge_store" in trail, trail
    r = run_cli(binary, "--store", url, "--audit-file", str(audit), "status", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["audit"], r.stdout
    for text in (log, trail, r.stdout, r.stderr):
        assert password not in text, "the database password was printed"
