"""The official Python MCP SDK drives `memstrata-mcp stdio` through a full agent workflow."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp import Client, MCPError, StdioServerParameters

pytestmark = pytest.mark.anyio

TOOLS = {
    "session_create", "session_save", "session_restore", "context_store", "context_retrieve", "context_switch",
    "llm_punch_in", "llm_punch_out", "system_status", "memory_optimize", "memory_store", "memory_retrieve",
    "memory_forget", "working_focus", "working_get", "workspace_add", "episode_record", "episode_get",
    "episode_search", "episodes_summarize", "knowledge_store", "knowledge_retrieve", "knowledge_query",
    "knowledge_update", "procedure_learn", "procedure_update", "procedure_list", "procedure_execute",
    "procedure_resume", "episode_record_many", "knowledge_store_many", "context_set_on_duplicate",
    "context_set_retention", "context_evictions",
}  # fmt: skip


def server(binary: str, store: Path) -> StdioServerParameters:
    return StdioServerParameters(command=binary, args=["--store", str(store), "stdio"])


async def ok(c: Client, name: str, args: dict[str, Any]) -> dict[str, Any]:
    """Call a tool that must succeed (the SDK validates structuredContent against outputSchema)."""
    r = await c.call_tool(name, args)
    assert not r.is_error, f"{name}: {r.content}"
    assert isinstance(r.structured_content, dict)
    return r.structured_content


async def err(c: Client, name: str, args: dict[str, Any]) -> str:
    """Call a tool that must fail as a tool error; return its message."""
    r = await c.call_tool(name, args)
    assert r.is_error, f"{name} should fail: {r.structured_content}"
    return r.content[0].text  # type: ignore[union-attr]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_agent_workflow(binary: str, tmp_path: Path, mode: str) -> None:
    async with Client(server(binary, tmp_path / "agent.mem"), mode=mode) as c:
        tools = await c.list_tools()
        assert {t.name for t in tools.tools} == TOOLS
        assert all(t.output_schema for t in tools.tools)
        assert next(t for t in tools.tools if t.name == "memory_retrieve").annotations.read_only_hint is True

        # Sessions: create, save twice, restore latest and version 1.
        s = await ok(c, "session_create", {"name": "refactor", "metadata": {"repo": "memstrata"}})
        sid = s["session_id"]
        assert (await ok(c, "session_save", {"session_id": sid, "content": {"step": 1}}))["version"] == 1
        v2 = await ok(c, "session_save", {"session_id": sid, "content": {"step": 2}, "compression_level": 2})
        assert v2["version"] == 2 and v2["success"] is True
        latest = await ok(c, "session_restore", {"session_id": sid})
        assert latest["version"] == 2 and latest["content"] == {"step": 2}
        assert latest["metadata"] == {"repo": "memstrata"}
        assert (await ok(c, "session_restore", {"session_id": sid, "version": 1}))["content"] == {"step": 1}
        msg = await err(c, "session_restore", {"session_id": sid, "version": 9})
        assert msg.startswith("NOT_FOUND:") and "1..=2" in msg

        # Contexts: store/retrieve in a namespace, then switch to it.
        stored = await ok(c, "context_store", {"key": "goal", "value": "ship it", "ttl": 3600, "namespace": "proj"})
        assert stored["success"] is True and stored["expires_at"]
        got = await ok(c, "context_retrieve", {"key": "goal", "namespace": "proj"})
        assert got["value"] == "ship it"
        assert await ok(c, "context_retrieve", {"key": "goal"}) == {
            "success": False, "value": None, "stored_at": None, "expires_at": None}
        sw = await ok(c, "context_switch", {"target_context": "proj", "preserve_current": True})
        assert sw == {"success": True, "previous_context": "default", "context_loaded": True}
        assert (await ok(c, "context_retrieve", {"key": "goal"}))["value"] == "ship it"

        # Timesheet.
        # `context` is the specification's free-text "additional context"; `namespace`
        # names the Memstrata context (default: the active one, "proj" here).
        note = "Additional context: the stdio suite, see docs/mcp.md (any text, not a context name)."
        pin = await ok(c, "llm_punch_in", {"llm_name": "claude", "task_description": "write the MCP tests",
                                           "context": note})
        pout = await ok(c, "llm_punch_out", {"task_id": pin["task_id"], "summary": "tests written"})
        assert pout["success"] is True and pout["files_modified"] == 0
        other = await ok(c, "llm_punch_in", {"llm_name": "gpt", "task_description": "review",
                                             "context": "second opinion", "namespace": "default"})
        await ok(c, "llm_punch_out", {"task_id": other["task_id"], "summary": "reviewed"})
        in_default = await ok(c, "episode_search", {"query": "", "tags": ["task"], "namespace": "default"})
        assert [h["episode"]["content"]["context"] for h in in_default["hits"]] == ["second opinion"]

        # Short-term and working memory.
        await ok(c, "memory_store", {"key": "draft", "value": {"text": "hello"}, "ttl": 300})
        r = await ok(c, "memory_retrieve", {"key": "draft"})
        assert r["found"] is True and r["value"] == {"text": "hello"}
        assert (await ok(c, "memory_forget", {"key": "draft"}))["forgotten"] is True
        assert (await ok(c, "memory_retrieve", {"key": "draft"}))["found"] is False
        await ok(c, "working_focus", {"item": "flaky test"})
        await ok(c, "workspace_add", {"value": {"file": "server.rs"}})
        w = await ok(c, "working_get", {})
        assert w["context"] == "proj" and w["focus"] == ["flaky test"] and len(w["workspace"]) == 1

        # Episodes.
        e1 = await ok(c, "episode_record", {"summary": "Deployed v2 to staging", "content": {"pr": 42},
                                            "participants": ["alice"], "tags": ["deploy"], "importance": 7})
        await ok(c, "episode_record", {"summary": "Lunch with the team", "tags": ["social"], "importance": 2})
        hits = await ok(c, "episode_search", {"query": "staging deploy", "limit": 5})
        assert hits["hits"][0]["episode"]["id"] == e1["id"]
        assert hits["hits"][0]["score"] > 0
        filt = await ok(c, "episode_search", {"query": "", "tags": ["task"]})
        assert len(filt["hits"]) == 1, "the punched-out task was recorded as an episode"
        assert filt["hits"][0]["episode"]["content"]["context"] == note
        assert (await ok(c, "episode_get", {"id": e1["id"]}))["episode"]["content"] == {"pr": 42}
        summary = await ok(c, "episodes_summarize", {"ids": [e1["id"]]})
        assert "staging" in summary["summary"]

        # Knowledge.
        await ok(c, "knowledge_store", {"key": "user:alice", "knowledge": {"role": "admin"}})
        upd = await ok(c, "knowledge_update", {"key": "user:alice", "patch": {"team": "infra", "role": None}})
        assert upd["knowledge"] == {"team": "infra"} and upd["version"] == 2
        assert (await ok(c, "knowledge_retrieve", {"key": "user:alice"}))["entry"]["knowledge"]["team"] == "infra"
        q = await ok(c, "knowledge_query", {"text": "infra"})
        assert q["hits"][0]["key"] == "user:alice"

        # Procedures: a host action pauses the run; the model performs it and resumes.
        steps = [
            {"id": "look", "description": "look up the ticket", "action": "lookup", "parameters": {"id": "{{ params.id }}"},
             "next": [{"condition": "last.severity > 3", "next": "page"}, {"condition": "true", "next": "note"}]},
            {"id": "page", "description": "page on-call", "action": "page", "parameters": {}},
            {"id": "note", "description": "remember it", "action": "episodic.record",
             "parameters": {"summary": "low-severity ticket"}},
        ]
        assert (await ok(c, "procedure_learn", {"name": "triage", "steps": steps}))["version"] == 1
        assert (await ok(c, "procedure_list", {}))["procedures"] == ["triage"]
        run = await ok(c, "procedure_execute", {"name": "triage", "params": {"id": 7}})
        assert run["status"] == "awaiting_action" and run["pending"]["parameters"] == {"id": 7}
        run = await ok(c, "procedure_resume", {"run_id": run["run_id"], "output": {"severity": 1}})
        assert run["status"] == "completed" and "note" in run["outputs"]
        assert (await ok(c, "procedure_update", {"name": "triage", "steps": steps[2:]}))["version"] == 2

        # Status and optimize.
        st = await ok(c, "system_status", {"include_sessions": True, "include_metrics": True})
        assert st["status"] == "healthy" and st["session_count"] == 1
        assert st["active_sessions"] == [{"session_id": sid, "name": "refactor", "created_at": s["created_at"]}]
        bare = await ok(c, "system_status", {"include_sessions": False})
        assert bare["active_sessions"] is None and bare["session_count"] is None
        assert st["metrics"]["operations"]["session.save"]["count"] == 2
        opt = await ok(c, "memory_optimize", {"level": "aggressive"})
        assert opt["success"] is True and isinstance(opt["bytes_saved"], int)

        # Resources and prompts.
        res = await c.list_resources()
        uris = {r.uri for r in res.resources}
        assert "memstrata://status" in uris and f"memstrata://sessions/{sid}" in uris
        assert "memstrata://knowledge/user:alice" in uris, "listing follows the active context (proj)"
        body = await c.read_resource("memstrata://knowledge/user:alice")
        assert '"team": "infra"' in body.contents[0].text  # type: ignore[union-attr]
        prompts = await c.list_prompts()
        assert {p.name for p in prompts.prompts} == {"resume_session", "recall", "handoff"}
        p = await c.get_prompt("resume_session", {"session_id": sid})
        assert '"step": 2' in p.messages[0].content.text  # type: ignore[union-attr]


async def test_bad_inputs(binary: str, tmp_path: Path) -> None:
    async with Client(server(binary, tmp_path / "bad.mem"), mode="legacy") as c:
        await c.list_tools()
        # Missing required field / wrong type: a tool error the model can act on (names the field).
        msg = await err(c, "memory_store", {"value": 1})
        assert msg.startswith("INVALID_INPUT:") and "key" in msg
        msg = await err(c, "episode_record", {"summary": "x", "importance": "very"})
        assert msg.startswith("INVALID_INPUT:")
        msg = await err(c, "episode_record", {"summary": "x", "importance": 42})
        assert msg.startswith("INVALID_INPUT:") and "importance" in msg
        msg = await err(c, "memory_store", {"key": "k", "value": 1, "ttl": 0})
        assert msg.startswith("INVALID_INPUT:") and "ttl" in msg
        # Unknown tool: a JSON-RPC error.
        with pytest.raises(MCPError) as e:
            await c.call_tool("no_such_tool", {})
        assert e.value.code == -32602 and "no_such_tool" in e.value.message
        # Oversize value (> 16 MiB): refused with LIMIT_EXCEEDED, and the connection stays usable.
        big = "x" * (16 * 1024 * 1024 + 1024)
        msg = await err(c, "memory_store", {"key": "big", "value": big})
        assert msg.startswith("LIMIT_EXCEEDED:") and "value" in msg
        assert (await ok(c, "memory_retrieve", {"key": "big"}))["found"] is False
        # Unknown resource and prompt: protocol errors.
        with pytest.raises(MCPError):
            await c.read_resource("memstrata://episodes/does-not-exist")
        with pytest.raises(MCPError):
            await c.get_prompt("no_such_prompt", {})


async def test_state_survives_restart(binary: str, tmp_path: Path) -> None:
    store = tmp_path / "persist.mem"
    async with Client(server(binary, store), mode="legacy") as c:
        sid = (await ok(c, "session_create", {"name": "long task"}))["session_id"]
        await ok(c, "session_save", {"session_id": sid, "content": {"done": ["a"]}})
        run = await ok(c, "procedure_learn", {"name": "ask", "steps": [{"id": "q", "action": "ask_user"}]})
        assert run["name"] == "ask"
        run = await ok(c, "procedure_execute", {"name": "ask"})
    async with Client(server(binary, store), mode="legacy") as c:
        assert (await ok(c, "session_restore", {"session_id": sid}))["content"] == {"done": ["a"]}
        # A paused run continues after the restart.
        done = await ok(c, "procedure_resume", {"run_id": run["run_id"], "output": "yes"})
        assert done["status"] == "completed" and done["outputs"]["q"] == "yes"


async def test_modern_listen_stream(binary: str, tmp_path: Path) -> None:
    """2026-07-28 `subscriptions/listen`: resource updates and list changes arrive as events."""
    import anyio
    from mcp.shared.subscriptions import ResourcesListChanged, ResourceUpdated

    async with Client(server(binary, tmp_path / "listen.mem"), mode="auto") as c:
        await ok(c, "knowledge_store", {"key": "watched", "knowledge": 1})
        async with c.listen(resources_list_changed=True, resource_subscriptions=["memstrata://knowledge/watched"]) as sub:
            assert sub.honored.resource_subscriptions == ["memstrata://knowledge/watched"]
            await ok(c, "knowledge_update", {"key": "watched", "patch": 2})
            await ok(c, "knowledge_store", {"key": "new-entry", "knowledge": 3})
            seen: list[object] = []
            with anyio.fail_after(30):  # turns a lost event into a failure instead of a hang
                async for event in sub:
                    seen.append(event)
                    if ResourceUpdated(uri="memstrata://knowledge/watched") in seen and ResourcesListChanged() in seen:
                        break


async def test_batch_tools(binary: str, tmp_path: Path) -> None:
    """episode_record_many / knowledge_store_many: a round trip, then a bad item that rejects the whole call."""
    async with Client(server(binary, tmp_path / "batch.mem")) as c:
        items = [{"summary": f"batch turn {i} about canoes", "tags": ["chat"]} for i in range(25)]
        ids = (await ok(c, "episode_record_many", {"items": items}))["ids"]
        assert len(ids) == 25
        assert (await ok(c, "episode_get", {"id": ids[9]}))["episode"]["summary"] == "batch turn 9 about canoes"
        hits = await ok(c, "episode_search", {"query": "", "tags": ["chat"], "limit": 100})
        assert len(hits["hits"]) == 25
        bad = [{"summary": f"poisoned {i}"} for i in range(5)]
        bad[2] = {"summary": "bad", "importance": 11}
        msg = await err(c, "episode_record_many", {"items": bad})
        assert msg.startswith("INVALID_INPUT") and "items[2].importance" in msg
        assert (await ok(c, "episode_search", {"query": "poisoned"}))["hits"] == []

        stored = await ok(c, "knowledge_store_many", {"items": [
            {"key": "user:ann", "knowledge": {"role": "dev"}},
            {"key": "user:ann", "knowledge": {"role": "lead"}}]})
        assert [e["version"] for e in stored["entries"]] == [1, 2]
        msg = await err(c, "knowledge_store_many", {"items": [{"key": "ok", "knowledge": 1}, {"key": "", "knowledge": 2}]})
        assert "items[1].key" in msg
        assert (await ok(c, "knowledge_retrieve", {"key": "ok"}))["found"] is False
