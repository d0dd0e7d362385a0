"""Soak of memstrata-mcp (run by scripts/soak.sh; `make soak`).

A mixed MCP workload through the official Python SDK, over streamable HTTP and over stdio
in turn, against one store (a directory, or a postgres:// schema), for --seconds. Each
cycle starts the server (`--durability immediate`), checks every write acknowledged so far,
runs clients until a random moment, then SIGKILLs the server; the last cycle runs without
a kill for a while and ends with SIGTERM (exit 0 expected). Throughout, the server's
resident memory (VmRSS) and open file descriptors (/proc/PID/fd) are sampled every second.

Workload per client: memory_store / memory_retrieve, episode_record / episode_search,
knowledge_store then knowledge_update merge patches (one new field each), session_create /
session_save / session_restore, procedure_execute of a procedure whose first step is a host
action (the run pauses awaiting_action) and procedure_resume (some runs are left paused).

Checked after every restart: each acknowledged memory value, episode (by id, and found by
search), knowledge field, session version and paused run (resumed now, it must complete).
An error is "explained" only if the call was in flight when the server was killed; any
other error, and any acknowledged write missing, fails the soak.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import random
import signal
import string
import subprocess
import sys
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

CALL_TIMEOUT = 120.0  # a bound for a call on a loaded machine, not a performance check
STEPS = [
    {"id": "look", "description": "look up the ticket", "action": "lookup", "parameters": {"id": "{{ params.id }}"}},
    {"id": "note", "description": "remember it", "action": "episodic.record", "parameters": {"summary": "soak ticket"}},
]


def word(n: int = 10) -> str:
    return "".join(random.choices(string.ascii_lowercase, k=n))


@dataclass
class Ledger:
    """Every write the server acknowledged (a success result came back)."""

    memory: dict[str, Any] = field(default_factory=dict)
    episodes: dict[str, str] = field(default_factory=dict)  # id -> unique word in its summary
    knowledge: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))  # key -> fields
    sessions: dict[tuple[str, int], Any] = field(default_factory=dict)  # (id, version) -> content
    paused: set[str] = field(default_factory=set)  # run ids acknowledged awaiting_action
    counts: dict[str, int] = field(default_factory=lambda: defaultdict(int))  # calls by outcome


@dataclass
class Stats:
    samples: list[tuple[float, int, int, str, int, int]] = field(default_factory=list)  # t, cycle, pid, mode, rss kB, fds
    unexplained: list[str] = field(default_factory=list)
    explained: int = 0
    lost: list[str] = field(default_factory=list)
    verified: int = 0
    cycles: list[dict[str, Any]] = field(default_factory=list)


class Killed(Exception):
    pass


class Server:
    """One server process: HTTP (spawned here) or stdio (spawned by the SDK)."""

    def __init__(self, binary: str, store: str, mode: str, logdir: Path, cycle: int) -> None:
        self.binary, self.store, self.mode, self.cycle = binary, store, mode, cycle
        self.log = logdir / f"cycle-{cycle:03d}-{mode}.log"
        self.pid = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""
        self.killed = False

    def base_args(self) -> list[str]:
        return ["--store", self.store, "--durability", "immediate", "--no-audit"]

    def start_http(self) -> None:
        errf = open(self.log, "w")
        self.proc = subprocess.Popen(
            [self.binary, *self.base_args(), "http", "--listen", "127.0.0.1:0"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )
        self.pid = self.proc.pid
        found = threading.Event()

        def pump() -> None:
            assert self.proc and self.proc.stderr
            for raw in self.proc.stderr:
                line = raw.decode(errors="replace")
                errf.write(line)
                errf.flush()
                if "listening on http://" in line and not found.is_set():
                    self.url = "http://" + line.split("http://", 1)[1].split("/", 1)[0]
                    found.set()
            errf.close()
            found.set()

        threading.Thread(target=pump, daemon=True).start()
        found.wait()
        if not self.url:
            raise RuntimeError(f"HTTP server exited before listening; see {self.log}")

    def client(self) -> Client:
        if self.mode == "http":
            return Client(streamable_http_client(f"{self.url}/mcp"), mode="legacy")
        params = StdioServerParameters(command=self.binary, args=[*self.base_args(), "stdio"])
        return Client(stdio_client(params, errlog=open(self.log, "a")), mode="legacy")

    def find_stdio_pid(self) -> None:
        """The SDK spawned the stdio server as our child: find it."""
        me = os.getpid()
        for p in Path("/proc").iterdir():
            if not p.name.isdigit():
                continue
            try:
                stat = (p / "stat").read_text()
                ppid = int(stat.rsplit(")", 1)[1].split()[1])
                cmd = (p / "cmdline").read_bytes().split(b"\0")
            except (OSError, ValueError, IndexError):
                continue
            if ppid == me and self.store.encode() in cmd and b"stdio" in cmd:
                self.pid = int(p.name)
                return
        raise RuntimeError("stdio server process not found")

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if sig == signal.SIGKILL:
            self.killed = True
        if self.pid:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def wait_gone(self) -> int | None:
        if self.proc:
            return self.proc.wait()
        # The stdio child is the SDK's; it reaps it. Wait until /proc shows it gone or a zombie.
        while True:
            try:
                state = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                return None
            if state == "Z":
                return None
            time.sleep(0.1)


def sample(pid: int) -> tuple[int, int] | None:
    try:
        rss = next(int(l.split()[1]) for l in Path(f"/proc/{pid}/status").read_text().splitlines() if l.startswith("VmRSS:"))
        fds = len(os.listdir(f"/proc/{pid}/fd"))
        return rss, fds
    except (OSError, StopIteration):
        return None


async def sampler(srv: Server, stats: Stats, t0: float, stop: asyncio.Event) -> None:
    while not stop.is_set():
        s = sample(srv.pid)
        if s:
            stats.samples.append((time.monotonic() - t0, srv.cycle, srv.pid, srv.mode, s[0], s[1]))
        try:
            await asyncio.wait_for(stop.wait(), 1.0)
        except asyncio.TimeoutError:
            pass


async def call(c: Client, srv: Server, led: Ledger, stats: Stats, name: str, args: dict[str, Any]) -> dict[str, Any] | None:
    """One tool call: the structured result, or None for a tool error (recorded)."""
    try:
        r = await asyncio.wait_for(c.call_tool(name, args), CALL_TIMEOUT)
    except Exception as e:  # noqa: BLE001 - any failure is classified below
        if srv.killed:
            stats.explained += 1
            raise Killed() from e
        stats.unexplained.append(f"cycle {srv.cycle} {srv.mode} {name}: {type(e).__name__}: {e}")
        led.counts["error"] += 1
        return None
    if r.is_error:
        if srv.killed:
            stats.explained += 1
            raise Killed()
        text = r.content[0].text if r.content else ""  # type: ignore[union-attr]
        stats.unexplained.append(f"cycle {srv.cycle} {srv.mode} {name} {json.dumps(args)[:200]}: {text[:300]}")
        led.counts["error"] += 1
        return None
    led.counts["ok"] += 1
    assert isinstance(r.structured_content, dict)
    return r.structured_content


async def verify(c: Client, srv: Server, led: Ledger, stats: Stats) -> None:
    """Every acknowledged write is readable after the restart."""

    async def check(what: str, ok: bool) -> None:
        if ok:
            stats.verified += 1
        else:
            stats.lost.append(f"after cycle {srv.cycle - 1}: {what}")

    for k, v in list(led.memory.items()):
        r = await call(c, srv, led, stats, "memory_retrieve", {"key": k})
        await check(f"memory {k}", r is not None and r.get("value") == v)
    for eid, tok in list(led.episodes.items()):
        r = await call(c, srv, led, stats, "episode_get", {"id": eid})
        await check(f"episode {eid}", r is not None and tok in json.dumps(r))
    for eid, tok in list(led.episodes.items())[-10:]:
        r = await call(c, srv, led, stats, "episode_search", {"query": tok, "limit": 5})
        await check(f"episode {eid} by search", r is not None and eid in json.dumps(r))
    for k, fields in list(led.knowledge.items()):
        r = await call(c, srv, led, stats, "knowledge_retrieve", {"key": k})
        have = set(((r or {}).get("entry") or {}).get("knowledge") or {})
        await check(f"knowledge {k} fields {sorted(fields - have)}", r is not None and fields <= have)
    for (sid, ver), content in list(led.sessions.items()):
        r = await call(c, srv, led, stats, "session_restore", {"session_id": sid, "version": ver})
        await check(f"session {sid} v{ver}", r is not None and r.get("content") == content)
    for run in list(led.paused):
        r = await call(c, srv, led, stats, "procedure_resume", {"run_id": run, "output": {"severity": 1}})
        await check(f"paused run {run}", r is not None and r.get("status") == "completed")
        led.paused.discard(run)


async def worker(c: Client, srv: Server, led: Ledger, stats: Stats, w: int, stop: asyncio.Event) -> None:
    cyc = srv.cycle
    kkey = f"k-{cyc}-{w}"
    r = await call(c, srv, led, stats, "knowledge_store", {"key": kkey, "knowledge": {"init": 0}})
    if r is None:
        return
    led.knowledge[kkey].add("init")
    r = await call(c, srv, led, stats, "session_create", {"name": f"soak {cyc}-{w}"})
    if r is None:
        return
    sid = r["session_id"]
    i = 0
    while not stop.is_set():
        i += 1
        op = random.choice(["mem", "mem", "ep", "ep", "search", "know", "know", "sess", "proc", "read"])
        if op == "mem":
            key, val = f"m-{cyc}-{w}-{i}", {"c": cyc, "w": w, "i": i}
            if await call(c, srv, led, stats, "memory_store", {"key": key, "value": val}) is not None:
                led.memory[key] = val
        elif op == "ep":
            tok = word()
            r = await call(c, srv, led, stats, "episode_record", {"summary": f"soak {tok} cycle {cyc}", "tags": ["soak"]})
            if r is not None:
                led.episodes[r["id"]] = tok
        elif op == "search" and led.episodes:
            eid, tok = random.choice(list(led.episodes.items()))
            r = await call(c, srv, led, stats, "episode_search", {"query": tok, "limit": 5})
            if r is not None and eid not in json.dumps(r):
                stats.unexplained.append(f"cycle {cyc}: search for {tok} missed acknowledged episode {eid}")
        elif op == "know":
            f = f"f{cyc}_{w}_{i}"
            if await call(c, srv, led, stats, "knowledge_update", {"key": kkey, "patch": {f: i}}) is not None:
                led.knowledge[kkey].add(f)
        elif op == "sess":
            content = {"c": cyc, "w": w, "i": i}
            r = await call(c, srv, led, stats, "session_save", {"session_id": sid, "content": content})
            if r is not None:
                led.sessions[(sid, r["version"])] = content
        elif op == "proc":
            r = await call(c, srv, led, stats, "procedure_execute", {"name": "soak-triage", "params": {"id": i}})
            if r is None:
                continue
            if r.get("status") != "awaiting_action":
                stats.unexplained.append(f"cycle {cyc}: procedure_execute gave {r.get('status')}, not awaiting_action")
                continue
            run = r["run_id"]
            led.paused.add(run)
            if random.random() < 0.7:
                r = await call(c, srv, led, stats, "procedure_resume", {"run_id": run, "output": {"severity": 1}})
                if r is not None:
                    led.paused.discard(run)
                    if r.get("status") != "completed":
                        stats.unexplained.append(f"cycle {cyc}: resumed run {run} is {r.get('status')}")
        elif op == "read" and led.memory:
            k, v = random.choice(list(led.memory.items()))
            r = await call(c, srv, led, stats, "memory_retrieve", {"key": k})
            if r is not None and r.get("value") != v:
                stats.lost.append(f"cycle {cyc}: read-your-write of {k} gave {r.get('value')}")


async def run_cycle(args: argparse.Namespace, cyc: int, mode: str, led: Ledger, stats: Stats, t0: float,
                    duration: float, last: bool) -> None:
    srv = Server(args.binary, args.store, mode, args.logdir, cyc)
    started = time.monotonic()
    if mode == "http":
        srv.start_http()
    stop_sampling = asyncio.Event()
    stop_work = asyncio.Event()
    sampling: asyncio.Task[None] | None = None
    clients = 3 if mode == "http" else 1
    workers_per_client = 1 if mode == "http" else 2
    ok_before = led.counts["ok"]
    exit_code: int | None = None
    try:
        async with srv.client() as first:
            if mode == "stdio":
                srv.find_stdio_pid()
            sampling = asyncio.create_task(sampler(srv, stats, t0, stop_sampling))
            if cyc == 0:
                await call(first, srv, led, stats, "procedure_learn", {"name": "soak-triage", "steps": STEPS})
            await verify(first, srv, led, stats)

            async def one_client(k: int) -> None:
                """Never raises: a failure is classified here (explained only by a kill)."""
                try:
                    if k == 0:
                        await asyncio.gather(*(worker(first, srv, led, stats, j, stop_work) for j in range(workers_per_client)))
                        return
                    async with srv.client() as cl:
                        await asyncio.gather(*(worker(cl, srv, led, stats, k * 10 + j, stop_work) for j in range(workers_per_client)))
                except (Killed, asyncio.CancelledError):
                    pass
                except BaseException as e:  # noqa: BLE001 - ExceptionGroups from the SDK's task groups too
                    if srv.killed:
                        stats.explained += 1
                    else:
                        stats.unexplained.append(f"cycle {cyc} {mode}: client {k} failed: {type(e).__name__}: {e}")

            async def stopper() -> None:
                await asyncio.sleep(duration)  # the random kill moment (or the steady phase's length)
                if last:
                    stop_work.set()
                else:
                    srv.kill()

            stop_task = asyncio.create_task(stopper())
            tasks = [asyncio.create_task(one_client(k)) for k in range(clients)]
            try:
                pending = set(tasks)
                while pending and not srv.killed and not stop_work.is_set():
                    _, pending = await asyncio.wait(pending, timeout=0.5)
            finally:
                if srv.killed:
                    # Calls in flight to the killed server: their outcome is unknown (not acknowledged).
                    for t in tasks:
                        t.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
            stop_task.cancel()
            if last:
                srv.kill(signal.SIGTERM)
                if srv.proc:
                    exit_code = srv.proc.wait()
    except* Exception as eg:  # the SDK's task groups surface the dead connection as a group
        if not srv.killed and not last:
            for e in eg.exceptions:
                stats.unexplained.append(f"cycle {cyc} {mode}: {type(e).__name__}: {e}")
        elif srv.killed:
            stats.explained += 1
    finally:
        stop_sampling.set()
        if sampling:
            await sampling
    if not last and not srv.killed:
        srv.kill()
    if srv.proc and exit_code is None:
        exit_code = srv.proc.wait()
    else:
        srv.wait_gone()
    stats.cycles.append({"cycle": cyc, "mode": mode, "seconds": round(time.monotonic() - started, 1),
                         "acknowledged": led.counts["ok"] - ok_before,
                         "end": "SIGTERM" if last else "SIGKILL", "exit": exit_code})
    if last and mode == "http" and exit_code != 0:
        stats.unexplained.append(f"cycle {cyc}: SIGTERM gave exit status {exit_code}, not 0 (see {srv.log})")


def table(stats: Stats, rows: int = 12) -> list[str]:
    if not stats.samples:
        return ["(no samples)"]
    end = stats.samples[-1][0]
    out = ["| t (s) | cycle | transport | pid | RSS (MiB) | open fds |", "|---|---|---|---|---|---|"]
    step = max(end / rows, 1.0)
    nxt = 0.0
    for t, cyc, pid, mode, rss, fds in stats.samples:
        if t >= nxt:
            out.append(f"| {t:.0f} | {cyc} | {mode} | {pid} | {rss / 1024:.1f} | {fds} |")
            nxt = t + step
    t, cyc, pid, mode, rss, fds = stats.samples[-1]
    out.append(f"| {t:.0f} | {cyc} | {mode} | {pid} | {rss / 1024:.1f} | {fds} |")
    return out


async def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--store", required=True)
    ap.add_argument("--backend", required=True)
    ap.add_argument("--seconds", type=float, default=120)
    ap.add_argument("--logdir", type=Path, required=True)
    ap.add_argument("--report", type=Path, required=True)
    ap.add_argument("--seed", type=int, default=int(time.time()))
    args = ap.parse_args()
    random.seed(args.seed)
    # The SDK logs the dead connection of every killed server (and rmcp's 202 to its session
    # DELETE); the soak classifies every call's failure itself.
    logging.getLogger("mcp").setLevel(logging.CRITICAL)
    args.logdir.mkdir(parents=True, exist_ok=True)
    led, stats = Ledger(), Stats()
    t0 = time.monotonic()
    steady = max(20.0, args.seconds * 0.25)
    cyc = 0
    while time.monotonic() - t0 < args.seconds - steady:
        mode = "http" if cyc % 2 == 0 else "stdio"
        await run_cycle(args, cyc, mode, led, stats, t0, random.uniform(2.0, 10.0), last=False)
        print(f"soak[{args.backend}]: cycle {cyc} ({mode}) killed; acknowledged so far: {led.counts['ok']}, "
              f"verified: {stats.verified}, lost: {len(stats.lost)}, unexplained errors: {len(stats.unexplained)}",
              flush=True)
        cyc += 1
    # Steady phase: one long-lived HTTP server, no kill, SIGTERM at the end; then a last check.
    await run_cycle(args, cyc, "http", led, stats, t0, steady, last=True)
    await run_cycle(args, cyc + 1, "stdio", led, stats, t0, 0.0, last=True)
    wall = time.monotonic() - t0

    steady_samples = [s for s in stats.samples if s[1] == cyc]
    rss_first = steady_samples[0][4] if steady_samples else 0
    rss_max = max((s[4] for s in steady_samples), default=0)
    fds_first = steady_samples[0][5] if steady_samples else 0
    fds_max = max((s[5] for s in steady_samples), default=0)
    all_fds = max((s[5] for s in stats.samples), default=0)
    all_rss = max((s[4] for s in stats.samples), default=0)
    bounded = fds_max <= fds_first + 32 and all_fds <= 512
    kills = sum(1 for c in stats.cycles if c["end"] == "SIGKILL")
    lines = [
        f"### {args.backend}: {wall:.0f} s, {len(stats.cycles)} server runs ({kills} SIGKILLed at random moments), seed {args.seed}",
        "",
        f"- calls acknowledged: {led.counts['ok']}; acknowledged writes checked after restarts: {stats.verified}; "
        f"**lost: {len(stats.lost)}**",
        f"- errors explained by a kill (calls in flight): {stats.explained}; **unexplained errors: {len(stats.unexplained)}**",
        f"- ledger at the end: {len(led.memory)} memory values, {len(led.episodes)} episodes, "
        f"{sum(len(v) for v in led.knowledge.values())} knowledge fields in {len(led.knowledge)} records, "
        f"{len(led.sessions)} session versions",
        f"- steady phase (one HTTP server, {steady:.0f} s, no kill): RSS {rss_first / 1024:.1f} -> max {rss_max / 1024:.1f} MiB, "
        f"fds {fds_first} -> max {fds_max}; over the whole soak: max RSS {all_rss / 1024:.1f} MiB, max fds {all_fds}",
        "",
        *table(stats),
        "",
    ]
    for what in stats.lost[:20]:
        lines.append(f"- LOST: {what}")
    for what in stats.unexplained[:20]:
        lines.append(f"- UNEXPLAINED: {what}")
    report = "\n".join(lines)
    args.report.write_text(report + "\n")
    print(report)
    if stats.lost or stats.unexplained or not bounded:
        print(f"soak[{args.backend}]: FAILED (lost {len(stats.lost)}, unexplained {len(stats.unexplained)}, "
              f"fds bounded: {bounded})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
