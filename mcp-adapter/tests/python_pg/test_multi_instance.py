"""Two `memstrata-mcp http` instances on different ports over one PostgreSQL database and
schema, driven by the official MCP SDK over streamable HTTP (issue 17's scale-out check):

- 50 concurrent clients spread across both, writing (episode_record, memory_store,
  knowledge_store) and reading: nothing lost, no duplicate ids, every write visible from
  the other instance (read and search);
- one instance killed with SIGKILL mid-load: every write it acknowledged is there
  through the survivor;
- a resource subscription on instance A hears of a write made through instance B
  (LISTEN/NOTIFY between the instances).

No timing assertions: the deadlines only turn a hang into a failure."""

from __future__ import annotations

import asyncio
import signal
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import Instance, execute, start_http, stop_cleanly
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

pytestmark = pytest.mark.anyio

CLIENTS = 50
ROUNDS = 4  # each round: one episode, one short-term value, one knowledge entry, two reads


def connect(i: Instance, **kw: Any) -> Client:
    return Client(streamable_http_client(f"{i.url}/mcp"), mode="legacy", **kw)


async def ok(c: Client, name: str, args: dict[str, Any]) -> dict[str, Any]:
    r = await c.call_tool(name, args)
    assert not r.is_error, f"{name}: {r.content}"
    return r.structured_content  # type: ignore[return-value]


@dataclass
class Acked:
    """Writes an instance acknowledged (a success result came back)."""

    episodes: dict[str, str] = field(default_factory=dict)  # id -> unique token in its summary
    memory: dict[str, int] = field(default_factory=dict)  # key -> value
    knowledge: dict[str, str] = field(default_factory=dict)  # key -> token


async def client_load(
    inst: Instance, n: int, rounds: int, acked: Acked, episode_ids: list[str], stop_on_error: bool = False
) -> None:
    """One client: `rounds` rounds of three writes and two reads of its own latest writes."""
    try:
        async with connect(inst) as c:
            for r in range(rounds):
                token = f"tok{n}x{r}x{uuid.uuid4().hex[:10]}"
                e = await ok(c, "episode_record", {"summary": f"client {n} round {r} {token}", "tags": [f"c{n}"]})
                episode_ids.append(e["id"])
                acked.episodes[e["id"]] = token
                key = f"m-{n}-{r}"
                await ok(c, "memory_store", {"key": key, "value": n * 1000 + r})
                acked.memory[key] = n * 1000 + r
                kkey = f"k-{n}-{r}"
                await ok(c, "knowledge_store", {"key": kkey, "knowledge": {"client": n, "round": r, "token": token}})
                acked.knowledge[kkey] = token
                got = await ok(c, "knowledge_retrieve", {"key": kkey})
                assert got["found"] and got["entry"]["knowledge"]["token"] == token
                hits = await ok(c, "episode_search", {"query": token})
                assert [h["episode"]["id"] for h in hits["hits"]] == [e["id"]], hits
    except BaseException:
        if not stop_on_error:
            raise


async def check_visible(inst: Instance, acked: Acked, verifiers: int = 8) -> None:
    """Every acknowledged write is there through `inst`: read by id/key, and found by search."""
    jobs: list[tuple[str, str, Any]] = (
        [("episode", i, t) for i, t in acked.episodes.items()]
        + [("memory", k, v) for k, v in acked.memory.items()]
        + [("knowledge", k, t) for k, t in acked.knowledge.items()]
    )
    missing: list[str] = []

    async def verifier(part: list[tuple[str, str, Any]]) -> None:
        async with connect(inst) as c:
            for kind, key, want in part:
                if kind == "episode":
                    got = await ok(c, "episode_get", {"id": key})
                    if not got["found"]:
                        missing.append(f"episode {key} (get)")
                        continue
                    hits = await ok(c, "episode_search", {"query": want})
                    if [h["episode"]["id"] for h in hits["hits"]] != [key]:
                        missing.append(f"episode {key} (search {want}: {hits['hits']})")
                elif kind == "memory":
                    got = await ok(c, "memory_retrieve", {"key": key})
                    if not got["found"] or got["value"] != want:
                        missing.append(f"memory {key}: {got}")
                else:
                    got = await ok(c, "knowledge_retrieve", {"key": key})
                    if not got["found"] or got["entry"]["knowledge"]["token"] != want:
                        missing.append(f"knowledge {key}: {got}")
                    hits = await ok(c, "knowledge_query", {"text": want})
                    if key not in [h["key"] for h in hits["hits"]]:
                        missing.append(f"knowledge {key} (query {want})")

    async with anyio.create_task_group() as tg:
        for v in range(verifiers):
            tg.start_soon(verifier, jobs[v::verifiers])
    assert not missing, f"{len(missing)} acknowledged writes not visible through {inst.url}: {missing[:10]}"


async def test_fifty_clients_over_two_instances(instances: list[Instance]) -> None:
    a, b = instances
    acked = {a.url: Acked(), b.url: Acked()}
    episode_ids: list[str] = []
    with anyio.fail_after(900):
        async with anyio.create_task_group() as tg:
            for n in range(CLIENTS):
                inst = (a, b)[n % 2]
                tg.start_soon(client_load, inst, n, ROUNDS, acked[inst.url], episode_ids)
    total = sum(len(x.episodes) + len(x.memory) + len(x.knowledge) for x in acked.values())
    assert total == CLIENTS * ROUNDS * 3
    assert len(set(episode_ids)) == len(episode_ids) == CLIENTS * ROUNDS, "duplicate episode ids"

    # Every write is visible from the other instance, and from its own.
    with anyio.fail_after(900):
        await check_visible(b, acked[a.url])
        await check_visible(a, acked[b.url])
    # Counts agree from both sides: nothing extra, nothing missing.
    for inst in (a, b):
        st = execute(inst, "system_status", {"include_metrics": True})
        items = st["metrics"]["items"]
        assert items["episodes"] == CLIENTS * ROUNDS, items
        assert items["semantic"] == CLIENTS * ROUNDS, items
        assert items["short_term"] == CLIENTS * ROUNDS, items
    for inst in (a, b):
        stop_cleanly(inst)


async def test_sigkill_of_one_instance_loses_nothing_acknowledged(instances: list[Instance]) -> None:
    a, b = instances
    acked_a, acked_b = Acked(), Acked()
    ids: list[str] = []
    killed = anyio.Event()

    async def killer() -> None:
        # Once B has acknowledged a good share of its writes, SIGKILL it mid-load.
        with anyio.fail_after(600):
            while len(acked_b.episodes) + len(acked_b.knowledge) < 60:
                await asyncio.sleep(0.01)
        b.proc.send_signal(signal.SIGKILL)
        b.proc.wait()
        killed.set()

    with anyio.fail_after(900):
        async with anyio.create_task_group() as tg:
            tg.start_soon(killer)
            for n in range(40):
                if n % 2:
                    # B's clients keep writing until B dies under them.
                    tg.start_soon(client_load, b, n, 1000, acked_b, ids, True)
                else:
                    tg.start_soon(client_load, a, n, 3, acked_a, ids, False)
    assert killed.is_set() and b.proc.returncode == -signal.SIGKILL
    assert len(acked_b.episodes) >= 30, "B was killed before it acknowledged anything worth checking"
    assert len(set(ids)) == len(ids)
    # The survivor has everything both acknowledged, B's up to the kill.
    with anyio.fail_after(900):
        await check_visible(a, acked_b)
        await check_visible(a, acked_a)
    # And A keeps serving writes after its peer died.
    await_ok = execute(a, "knowledge_store", {"key": "after-kill", "knowledge": "still here"})
    assert await_ok["success"]


async def test_subscription_on_a_hears_writes_through_b(instances: list[Instance]) -> None:
    a, b = instances
    import mcp_types

    updated: list[str] = []
    lists = anyio.Event()
    got = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, mcp_types.ResourceUpdatedNotification):
            updated.append(str(message.params.uri))
            got.set()
        elif isinstance(message, mcp_types.ResourceListChangedNotification):
            lists.set()

    execute(a, "knowledge_store", {"key": "watched", "knowledge": {"v": 1}})
    async with connect(a, message_handler=on_message) as c:
        await c.subscribe_resource("memstrata://knowledge/watched")
        # Written through B: A's subscriber is told (B NOTIFYs, A LISTENs and re-publishes).
        r = execute(b, "knowledge_update", {"key": "watched", "patch": {"v": 2}})
        assert r["version"] == 2
        with anyio.fail_after(60):  # turns a lost notification into a failure instead of a hang
            await got.wait()
        assert updated == ["memstrata://knowledge/watched"]
        # A new entry through B changes the resource list A's client sees.
        execute(b, "knowledge_store", {"key": "new-one", "knowledge": "x"})
        with anyio.fail_after(60):
            await lists.wait()
        # And the content A serves is B's write.
        res = await c.read_resource("memstrata://knowledge/watched")
        assert '"v":2' in res.contents[0].text.replace(" ", "")  # type: ignore[union-attr]
        await c.unsubscribe_resource("memstrata://knowledge/watched")


async def test_instances_write_to_one_record_concurrently(instances: list[Instance], tmp_path: Path) -> None:
    """Merge patches to ONE knowledge entry from clients on both instances: each patch
    adds one member; none is lost (the backend's transactions, not one process, order them)."""
    a, b = instances
    execute(a, "knowledge_store", {"key": "shared", "knowledge": {}})
    acked: list[str] = []

    async def writer(inst: Instance, n: int) -> None:
        async with connect(inst) as c:
            for r in range(5):
                member = f"w{n}r{r}"
                await ok(c, "knowledge_update", {"key": "shared", "patch": {member: True}})
                acked.append(member)

    with anyio.fail_after(600):
        async with anyio.create_task_group() as tg:
            for n in range(20):
                tg.start_soon(writer, (a, b)[n % 2], n)
    for inst in (a, b):
        got = execute(inst, "knowledge_retrieve", {"key": "shared"})["entry"]
        assert sorted(got["knowledge"]) == sorted(acked)
        assert got["version"] == 1 + len(acked)
