"""Drive the installed `memstrata-mcp` server with the official Python MCP client over stdio
(run by scripts/test-dist.sh, no Rust toolchain on PATH).

    smoke_mcp.py COMMAND [ARGS...]

COMMAND ARGS is how the server is launched: the virtualenv's console script, or
`uvx --from <wheel> memstrata-mcp`. Two runs: an explicit `--store`, then no `--store`
with HOME and XDG_DATA_HOME pointing into a temporary directory, to show the default store
is the per-user data directory (`$XDG_DATA_HOME/memstrata/default.mem`), never a path
inside the installed package."""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


def fail(what: str) -> None:
    raise SystemExit(f"smoke_mcp: FAILED: {what}")


async def call(s: ClientSession, name: str, args: dict[str, Any]) -> dict[str, Any]:
    r = await s.call_tool(name, args)
    # The SDK's field names: snake_case from mcp 2, camelCase before.
    is_error = getattr(r, "is_error", None) if hasattr(r, "is_error") else getattr(r, "isError", None)
    structured = getattr(r, "structured_content", None) if hasattr(r, "structured_content") \
        else getattr(r, "structuredContent", None)
    if is_error or not isinstance(structured, dict):
        fail(f"{name}: {r.content}")
    return structured


async def workflow(params: StdioServerParameters) -> int:
    async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
        info = await s.initialize()
        server = getattr(info, "server_info", None) or getattr(info, "serverInfo", None)
        if server is None or server.name != "memstrata-mcp":
            fail(f"server info {server!r}")
        tools = {t.name for t in (await s.list_tools()).tools}
        for needed in ("knowledge_store", "episode_record", "episode_search", "session_create", "system_status"):
            if needed not in tools:
                fail(f"tool {needed} missing from {sorted(tools)}")
        await call(s, "knowledge_store", {"key": "user:alice", "knowledge": {"role": "admin"}})
        got = await call(s, "knowledge_retrieve", {"key": "user:alice"})
        if (got.get("entry") or {}).get("knowledge") != {"role": "admin"}:
            fail(f"knowledge_retrieve returned {got}")
        await call(s, "episode_record", {"summary": "Deployed v2 to staging", "tags": ["deploy"]})
        hits = await call(s, "episode_search", {"query": "staging deploy"})
        found = hits.get("hits") or []
        if not found or found[0]["episode"]["summary"] != "Deployed v2 to staging":
            fail(f"episode_search found nothing: {hits}")
        status = await call(s, "system_status", {})
        if status.get("status") != "healthy":
            fail(f"system_status {status}")
        return len(tools)


def main() -> None:
    command, args = sys.argv[1], sys.argv[2:]
    tmp = Path(tempfile.mkdtemp(prefix="memstrata-dist-mcp-"))
    store = tmp / "agent.mem"
    n = asyncio.run(workflow(StdioServerParameters(
        command=command, args=[*args, "--store", str(store), "stdio"], env=dict(os.environ))))
    if not store.is_dir():
        fail(f"--store {store} was not created")
    # The default store: the per-user data directory of the platform.
    home = tmp / "home"
    data = home / ".local" / "share"
    env = {**os.environ, "HOME": str(home), "XDG_DATA_HOME": str(data)}
    env.pop("MEMSTRATA_STORE", None)
    asyncio.run(workflow(StdioServerParameters(command=command, args=[*args, "stdio"], env=env)))
    default = data / "memstrata" / "default.mem"
    if not default.is_dir():
        fail(f"the default store is not {default}: {sorted(str(p) for p in tmp.rglob('*.mem'))}")
    print(f"smoke_mcp: ok ({n} tools over stdio via {Path(command).name} {' '.join(args)}; "
          f"default store {default.relative_to(tmp)} under the user data dir)")


if __name__ == "__main__":
    main()
