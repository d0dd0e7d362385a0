"""Footprint probe: resident memory and disk for short (~100 character) episodes.

Each measurement runs in a fresh Python process (this script re-invokes itself
with `--child`), so the baseline RSS, the peak and what stays after `close()`
belong to that store alone. Next to it, SQLite FTS5 (stdlib sqlite3) stores the
same texts in one table.

Usage (the binding must be importable, e.g. PYTHONPATH=<dir of a release wheel>):
    python benches/footprint/probe.py [-n 100000] [-n 20000] [--chars 100] [--chars 2000]
        [--opt cache_bytes=8388608] [--trim] [--md out.md] [--json out.json] [--label after]
        [--mode percall] [--mode batch] [--batch 1000]

`make bench` runs it through scripts/bench-footprint.sh (100k, and 1M with
BENCH_FULL=1; chat-sized 100-character and document-sized 2,000-character
episodes). `--mode percall` records one episode per `episodic.record`
call; `--mode batch` records them with `episodic.record_many`, `--batch`
episodes per call (default 1000; the time includes building the item
dicts). Without `--mode`, both run (each in its own fresh process) when the
binding has `record_many`, per call only otherwise (the batch column then
says `n/a`). Texts are generated before the clock starts.

Memory figures come from /proc/self/status (VmRSS; VmHWM for the peak), so the
probe runs on Linux only. Disk is the size of every file under the store
directory right after ingest and close.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import random
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time

WORDS = (
    "the agent user asked about deploy build failed retry config token cache "
    "server client request timeout error fixed update note meeting tomorrow "
    "schedule review branch merge test passed docs release version python rust "
    "memory search index query result file path open close write read latency "
    "project plan budget summary context session task done pending blocked"
).split()


def text(i: int, chars: int = 100) -> str:
    """A deterministic chat-like line of exactly `chars` characters for episode `i`."""
    rng = random.Random(i)
    out = [f"#{i}"]
    n = 3
    while n < chars:
        w = rng.choice(WORDS)
        out.append(w)
        n += len(w) + 1
    return " ".join(out)[:chars]


def status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def ext_code_kib() -> int:
    """Resident KiB of the extension module's own mappings (`_memstrata*.so`: its code pages)."""
    total, inside = 0, False
    try:
        with open("/proc/self/smaps") as f:
            for line in f:
                head = line.split(None, 1)[0]
                if "-" in head and not head.endswith(":"):
                    inside = "_memstrata" in line
                elif inside and line.startswith("Rss:"):
                    total += int(line.split()[1])
    except OSError:
        return 0
    return total


def mib(kib: float) -> float:
    return kib / 1024.0


def disk_bytes(root: str) -> dict:
    """Bytes of every file under `root`, and per top-level entry."""
    total = 0
    parts: dict = {}
    for dirpath, _dirs, files in os.walk(root):
        rel = os.path.relpath(dirpath, root).split(os.sep)[0]
        for name in files:
            try:
                size = os.path.getsize(os.path.join(dirpath, name))
            except FileNotFoundError:
                continue
            total += size
            key = rel if rel != "." else name
            parts[key] = parts.get(key, 0) + size
    return {"total": total, "parts": parts}


def trim() -> None:
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def batch_call(ep):
    """The binding's batch write (`record_many`), or None when it has none."""
    return getattr(ep, "record_many", None)


def child_memstrata(n: int, opts: dict, do_trim: bool, chars: int = 100, batch: int = 0) -> dict:
    import memstrata

    # Texts made before the baseline and the clock: the figures are the
    # store's, not the generator's (at 1M the list alone is ~150 MiB). They
    # stay alive until every figure is read.
    texts = [text(i, chars) for i in range(n)]
    gc.collect()
    base = status_kib("VmRSS")
    base_anon = status_kib("RssAnon")
    base_code = ext_code_kib()
    d = tempfile.mkdtemp(prefix="memstrata-fp-")
    path = os.path.join(d, "store")
    mem = memstrata.Memory(path, **opts)
    ep = mem.episodic
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    if batch:
        many = batch_call(ep)
        for start in range(0, n, batch):
            many([{"summary": t} for t in texts[start : start + batch]])
    else:
        for t in texts:
            ep.record(t)
    dt = time.perf_counter() - t0
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    end_rss = status_kib("VmRSS")
    end_file = status_kib("RssFile")
    end_anon = status_kib("RssAnon")
    end_code = ext_code_kib()
    live_end = None
    if os.environ.get("FP_TRIM_BEFORE_CLOSE"):
        # Diagnosis: how much of the end-of-ingest RSS is freed heap glibc kept.
        trim()
        live_end = mib(status_kib("VmRSS") - base)
    peak_ingest = status_kib("VmHWM")
    tc = time.perf_counter()
    mem.close()
    close_s = time.perf_counter() - tc
    after_close = status_kib("VmRSS")
    after_close_anon = status_kib("RssAnon")
    close_code = ext_code_kib()
    del ep, mem
    gc.collect()
    after_gc = status_kib("VmRSS")
    if do_trim:
        trim()
    after_trim = status_kib("VmRSS")
    peak = status_kib("VmHWM")
    del texts
    disk = disk_bytes(path)
    search_p50 = None
    queries = int(os.environ.get("FP_SEARCHES", "0"))
    if queries:
        # Reopen and search: what a smaller sled cache costs reads.
        mem = memstrata.Memory(path, **opts)
        rng = random.Random(7)
        lat = []
        for _ in range(queries):
            q = " ".join(rng.sample(WORDS, 2))
            t = time.perf_counter()
            mem.episodic.search(q, limit=10)
            lat.append(time.perf_counter() - t)
        mem.close()
        lat.sort()
        search_p50 = lat[len(lat) // 2] * 1e3
    shutil.rmtree(d, ignore_errors=True)
    return {
        "engine": "memstrata",
        "n": n,
        "chars": chars,
        "mode": f"batch {batch}" if batch else "per call",
        "version": getattr(memstrata, "__version__", "?"),
        "base_mib": mib(base),
        "peak_added_mib": mib(peak - base),
        "end_added_mib": mib(end_rss - base),
        "close_added_mib": mib(after_close - base),
        "gc_added_mib": mib(after_gc - base),
        "trim_added_mib": mib(after_trim - base) if do_trim else None,
        "disk_per_ep": disk["total"] / n,
        "disk_parts": {k: v / n for k, v in sorted(disk["parts"].items())},
        "eps": n / dt,
        "eps_cpu": n / cpu if cpu > 0 else None,
        "end_file_mib": mib(end_file),
        "end_trimmed_mib": live_end,
        "close_s": close_s,
        "peak_ingest_added_mib": mib(peak_ingest - base),
        "end_anon_added_mib": mib(end_anon - base_anon),
        "close_anon_added_mib": mib(after_close_anon - base_anon),
        "search_p50_ms": search_p50,
        "code_base_mib": mib(base_code),
        "code_end_mib": mib(end_code),
        "code_close_mib": mib(close_code),
    }


def child_fts5(n: int, chars: int = 100) -> dict:
    gc.collect()
    base = status_kib("VmRSS")
    d = tempfile.mkdtemp(prefix="fts5-fp-")
    path = os.path.join(d, "fts.db")
    con = sqlite3.connect(path)
    con.execute("CREATE VIRTUAL TABLE ep USING fts5(body)")
    t0 = time.perf_counter()
    for i in range(n):
        con.execute("INSERT INTO ep(body) VALUES (?)", (text(i, chars),))
        if i % 1000 == 999:
            con.commit()
    con.commit()
    dt = time.perf_counter() - t0
    con.close()
    peak = status_kib("VmHWM")
    size = disk_bytes(d)["total"]
    shutil.rmtree(d, ignore_errors=True)
    return {
        "engine": "fts5",
        "n": n,
        "chars": chars,
        "base_mib": mib(base),
        "peak_added_mib": mib(peak - base),
        "disk_per_ep": size / n,
        "eps": n / dt,
    }


def parse_opt(s: str) -> tuple:
    k, _, v = s.partition("=")
    if v in ("true", "false"):
        return k, v == "true"
    try:
        return k, int(v)
    except ValueError:
        return k, v


def run_child(args: list, env_extra: dict) -> dict:
    env = dict(os.environ, **env_extra)
    out = subprocess.run(
        [sys.executable, __file__, "--child", *args], capture_output=True, text=True, env=env
    )
    if out.returncode != 0:
        raise SystemExit(f"child failed ({args}):\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def fmt(v, spec=".0f") -> str:
    return "—" if v is None else format(v, spec)


def machine() -> list:
    """What the figures depend on: CPU, cores, memory, kernel, Python, load."""
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "?")
    except OSError:
        pass
    mem_gib = status_mem_gib()
    u = os.uname()
    return [
        f"CPU: {cpu}, {os.cpu_count()} logical CPUs; RAM {mem_gib:.1f} GiB",
        f"OS: {u.sysname} {u.release} ({u.machine}); Python {sys.version.split()[0]}",
    ]


def status_mem_gib() -> float:
    try:
        with open("/proc/meminfo") as f:
            for ln in f:
                if ln.startswith("MemTotal:"):
                    return int(ln.split()[1]) / 1024 / 1024
    except OSError:
        pass
    return 0.0


def commit() -> str:
    if os.environ.get("FP_COMMIT"):
        return os.environ["FP_COMMIT"]
    try:
        here = os.path.dirname(os.path.abspath(__file__))
        out = subprocess.run(["git", "-C", here, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
        return out.stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def status(ok) -> str:
    return "–" if ok is None else ("met" if ok else "missed")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, action="append", help="episodes per run (repeatable; default 20000)")
    ap.add_argument("--chars", type=int, action="append", help="characters per episode (repeatable; default 100)")
    ap.add_argument("--opt", action="append", default=[], help="Memory(...) keyword, k=v (repeatable)")
    ap.add_argument("--env", action="append", default=[], help="K=V for the child process (repeatable)")
    ap.add_argument("--trim", action="store_true", help="also call glibc malloc_trim(0) after close (a probe)")
    ap.add_argument("--no-fts5", action="store_true")
    ap.add_argument("--no-batch", action="store_true", help="skip the batch-ingest child even if record_many exists")
    ap.add_argument("--label", default="default")
    ap.add_argument("--md", help="also write the tables (machine, commit, targets) to this Markdown file")
    ap.add_argument("--json", help="also write every child's result to this JSON file")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--mode", action="append", choices=["percall", "batch"],
                    help="percall and/or batch (record_many); repeatable (default: both when record_many exists)")
    ap.add_argument("--batch", type=int, default=1000, help="episodes per record_many call (--mode batch)")
    ap.add_argument("--engine", default="memstrata", help=argparse.SUPPRESS)
    a = ap.parse_args()
    sizes = a.n or [20000]
    lengths = a.chars or [100]
    if a.child:
        opts = dict(parse_opt(o) for o in a.opt)
        if a.engine == "fts5":
            res = child_fts5(sizes[0], lengths[0])
        elif a.engine == "has-batch":
            import memstrata

            m = memstrata.Memory(None)
            res = {"has_batch": batch_call(m.episodic) is not None}
            m.close()
        else:
            batch = a.batch if (a.mode or ["percall"])[0] == "batch" else 0
            res = child_memstrata(sizes[0], opts, a.trim, lengths[0], batch)
        print(json.dumps(res))
        return
    env_extra = dict(e.split("=", 1) for e in a.env)
    load = os.getloadavg()
    lines = [
        f"Label `{a.label}`; commit `{commit()}`; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
        f"options {a.opt or 'default'}; env {a.env or '-'}.",
        "",
        *(f"- {m}" for m in machine()),
        f"- Load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}",
        "",
    ]
    print("\n".join(lines), flush=True)
    if a.mode:
        has_batch = "batch" in a.mode
    else:
        has_batch = False if a.no_batch else run_child(["-n=1", "--engine=has-batch"], env_extra).get("has_batch", False)
    do_percall = not a.mode or "percall" in a.mode
    head = ("| run | chars | n | peak +MiB | end of ingest +MiB | after close +MiB | after gc +MiB "
            "| after malloc_trim +MiB | disk B/episode | FTS5 B/row | ratio | episodes/s | batch episodes/s "
            "| FTS5 rows/s |")
    table = [head, "|" + "---|" * 14]
    print("\n".join(table), flush=True)
    notes, results, targets = [], [], []
    for chars in lengths:
        for n in sizes:
            child_args = [f"-n={n}", f"--chars={chars}", *(f"--opt={o}" for o in a.opt)] + (["--trim"] if a.trim else [])
            b = run_child(child_args + ["--mode=batch", f"--batch={a.batch}"], env_extra) if has_batch else None
            r = run_child(child_args + ["--mode=percall"], env_extra) if do_percall else b
            f = None if a.no_fts5 else run_child([f"-n={n}", f"--chars={chars}", "--engine=fts5"], {})
            ratio = None if f is None else r["disk_per_ep"] / f["disk_per_ep"]
            row = (
                f"| {a.label} | {chars} | {n} | {fmt(r['peak_added_mib'])} | {fmt(r['end_added_mib'])} "
                f"| {fmt(r['close_added_mib'])} | {fmt(r['gc_added_mib'])} | {fmt(r['trim_added_mib'])} "
                f"| {fmt(r['disk_per_ep'])} | {fmt(None if f is None else f['disk_per_ep'])} | {fmt(ratio, '.2f')} "
                f"| {fmt(r['eps'])} | {fmt(None if b is None else b['eps']) if has_batch else 'n/a'} "
                f"| {fmt(None if f is None else f['eps'])} |"
            )
            table.append(row)
            print(row, flush=True)
            parts = ", ".join(f"{k} {v:.0f}" for k, v in r["disk_parts"].items())
            note = (f"chars={chars} n={n}: disk B/episode by part: {parts}; base RSS {r['base_mib']:.0f} MiB; "
                    f"file-backed RSS at end of ingest {r['end_file_mib']:.0f} MiB; "
                    f"end of ingest after malloc_trim {fmt(r['end_trimmed_mib'])} MiB; "
                    f"anonymous RSS (heap, stacks; no code pages) above baseline at end of ingest "
                    f"{fmt(r.get('end_anon_added_mib'))} MiB, after close {fmt(r.get('close_anon_added_mib'))} MiB; "
                    f"close() took {fmt(r.get('close_s'), '.2f')} s; "
                    f"the extension's resident code pages (MiB) at baseline {fmt(r.get('code_base_mib'), '.1f')}, "
                    f"end of ingest {fmt(r.get('code_end_mib'), '.1f')}, after close {fmt(r.get('code_close_mib'), '.1f')}; "
                    f"search p50 {fmt(r.get('search_p50_ms'), '.2f')} ms (FP_SEARCHES); "
                    f"peak before close {fmt(r.get('peak_ingest_added_mib'))} MiB; "
                    f"episodes per CPU-second (all threads) {r['mode']} {fmt(r['eps_cpu'])}"
                    + ("" if b is None else f", batch {fmt(b['eps_cpu'])}"))
            notes.append(note)
            results.append({"memstrata": r, "batch": b, "fts5": f})
            if chars <= 200:
                returned = None
                if r["end_added_mib"] > 0:
                    returned = 1 - r["close_added_mib"] / r["end_added_mib"]
                targets.append(f"| peak RSS above baseline, {chars}-char episodes | {n} "
                               f"| {fmt(r['peak_added_mib'])} MiB | ≤ 128 MiB | {status(r['peak_added_mib'] <= 128)} |")
                targets.append(f"| RSS returned by `close()` | {n} | {fmt(None if returned is None else 100 * returned)} % "
                               f"| ≥ 90 % | {status(None if returned is None else returned >= 0.9)} |")
                targets.append(f"| disk per episode ÷ FTS5, {chars}-char episodes | {n} | {fmt(ratio, '.2f')}× "
                               f"| ≤ 2× | {status(None if ratio is None else ratio <= 2)} |")
    load = os.getloadavg()
    tail = f"Load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    print("\n" + tail)
    if a.md:
        with open(a.md, "w") as out:
            out.write("## Footprint: resident memory and disk per episode\n\n")
            out.write("\n".join(lines) + "\n")
            out.write("Fresh Python process per run; RSS in MiB above the process's RSS after `import memstrata`; "
                      "disk right after ingest and `close()`. Method: docs/benchmarks/footprint.md.\n\n")
            out.write("\n".join(table) + "\n\n")
            if not has_batch:
                out.write("Batch ingest: n/a (this binding has no `episodic.record_many`).\n\n")
            out.write("### Footprint targets\n\n| target | size | measured | goal | status |\n|---|---|---|---|---|\n")
            out.write("\n".join(targets) + "\n\n")
            out.write("\n".join(f"- {x}" for x in notes) + f"\n\n{tail}\n")
    if a.json:
        with open(a.json, "w") as out:
            json.dump({"label": a.label, "commit": commit(), "machine": machine(), "runs": results}, out, indent=1)


if __name__ == "__main__":
    main()
