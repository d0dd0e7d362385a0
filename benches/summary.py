"""docs/benchmarks.md, the one-page summary of a `make bench` run: every target with its
measured figure, goal and status, the machine, commit and date, and links to the
per-topic pages (docs/benchmarks/*.md) that hold the method and the findings.

    python3 benches/summary.py RESULTS_DIR OUT_MD

RESULTS_DIR is what scripts/bench.sh writes (target/bench):
  run.env          RUN_DATE, RUN_ELAPSED, RUN_SIZES, RUN_COMMIT, RUN_LOAD_BEFORE, RUN_LOAD_AFTER,
                   optionally RUN_NOTE (one paragraph, printed as is)
  compare.md       `## Machine` (bullets) and `## Targets` (target | size | measured | goal | status)
  mcp-load.json    `mcp-load --json` rows (benches/src/bin/mcp_load/); else mcp-load.md, its table
  node.md          the Node binding's tables whose last two columns are goal | status
  footprint.md     scripts/bench-footprint.sh: its targets (target | size | measured | goal | status)
  hybrid.md, encryption.md, python.md, mcp.md, mcp-concurrency.md, retrieval.md: linked, not parsed
and, when present, quick/report.md (the last `make bench-quick`: the same five-column table).

A missing file is a row saying "not measured in this run", never an invented figure.
Standard library only.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "python"))
from quick_report import fmt_ns  # noqa: E402

Row = list[str]  # target, size, measured, goal, status, page

PAGES = [
    ("method.md", "How the benchmarks are run", "corpus, machine, profiles, targets outside this table, caveats"),
    ("short-term.md", "Short-term layer vs raw sled", "`store` / `retrieve` against raw sled, the packed cache"),
    ("search.md", "Episode search", "vs raw tantivy and SQLite FTS5; why the tantivy ratio is missed"),
    ("ingest-footprint.md", "Ingest, footprint, open", "record throughput, stalls, disk vs FTS5, open time, RSS"),
    ("footprint.md", "Footprint of short episodes", "peak and after-close RSS, disk per chat-sized episode vs FTS5"),
    ("sessions.md", "Session compression levels", "size and time of the four levels"),
    ("mixed-load.md", "In-process mixed load", "8 threads on one `Memory`, the index overlay"),
    ("encryption.md", "Encryption at rest", "plaintext vs sealed store, same workload"),
    ("hybrid.md", "Hybrid search", "the cost of the vector list, bytes per vector"),
    ("python.md", "Python binding", "per-call overhead vs Rust"),
    ("node.md", "Node binding", "overhead, search vs better-sqlite3, vs the reference MCP server"),
    ("mcp.md", "MCP server", "transports, bounded load, wrk, end-to-end and concurrent writers"),
    ("postgres.md", "PostgreSQL backend", "per call vs sled, SQL search, pgvector, several instances"),
    ("retrieval.md", "Retrieval quality", "recall and MRR of BM25, FTS5, vectors and fusions"),
]


def read_env(path: Path) -> dict[str, str]:
    env: dict[str, str] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if "=" in line and not line.lstrip().startswith("#"):
                k, v = line.split("=", 1)
                parts = shlex.split(v) if v.strip() else [""]
                env[k.strip()] = parts[0] if parts else ""
    return env


def section(md: str, title: str) -> list[str]:
    """The lines of `## title` (up to the next `## `)."""
    out, inside = [], False
    for line in md.splitlines():
        if line.startswith("## "):
            inside = line[3:].strip() == title
            continue
        if inside:
            out.append(line)
    return out


def cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def five_column_rows(lines: list[str], page: str) -> list[Row]:
    rows = []
    for line in lines:
        if line.startswith("| ") and not line.startswith("| target") and not line.startswith("|---"):
            c = cells(line)
            if len(c) == 5:
                rows.append(c + [page])
    return rows


def goal_status_rows(md: str, page: str, label: str) -> list[Row]:
    """Rows of every table whose header ends in `goal | status`: the measured figure is the
    column named like a ratio (`speed-up (p50)`, `÷`), else the one before `goal`."""
    rows: list[Row] = []
    header: list[str] | None = None
    heading = ""
    for line in md.splitlines():
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
        if not line.startswith("|"):
            header = None
            continue
        c = cells(line)
        if header is None:
            header = c if len(c) >= 3 and c[-2:] == ["goal", "status"] else None
            continue
        if line.startswith("|---") or len(c) != len(header):
            continue
        pick = next((i for i, h in enumerate(header) if "speed-up (p50)" in h or "÷" in h), len(header) - 3)
        rows.append([f"{label}, {heading or header[pick]} ({header[pick]})", c[0], c[pick].replace("**", ""),
                     c[-2], c[-1], page])
    return rows


def mcp_rows(path: Path) -> list[Row]:
    rows: list[Row] = []
    for r in json.loads(path.read_text()):
        if r.get("baseline"):
            continue
        goal, _, status = r["target"].rpartition(": ")
        if r["rate"] is None:
            measured = f"not measured ({r.get('failure') or 'no call completed'})"
        else:
            measured = (f"{r['rate']:.0f}/s, p99 {fmt_ns(r['p99_ns'])}, {r['errors']} errors, "
                        f"{r['lost'] if r['lost'] is not None else '–'} lost")
        rows.append([f"MCP load: {r['label']}", f"C = {r['clients']}", measured, goal or "–", status or "–", "mcp.md"])
    return rows


def mcp_md_rows(md: str) -> list[Row]:
    """The same rows from `mcp-load --md` (when the JSON is absent): the last column is `goal: status`."""
    rows: list[Row] = []
    header: list[str] | None = None
    for line in md.splitlines():
        if not line.startswith("|"):
            header = None
            continue
        c = cells(line)
        if header is None:
            header = c if c and c[-1] == "target" and "calls/s" in c else None
            continue
        if line.startswith("|---") or len(c) != len(header):
            continue
        col = {h: i for i, h in enumerate(header)}
        goal, _, status = c[-1].rpartition(": ")
        lost = next((c[i].split("/")[-1].strip() for h, i in col.items() if "LOST" in h), "–")
        measured = f"{c[col['calls/s']]}/s, p99 {c[col['p99']]}, {c[col['errors']]} errors, {lost} lost"
        rows.append([f"MCP load: {c[0]}", f"C = {c[1]}", measured, goal or "–", status or "–", "mcp.md"])
    return rows


def missing(what: str, page: str) -> Row:
    return [what, "–", "not measured in this run", "–", "–", page]


def render(d: Path) -> str:
    env = read_env(d / "run.env")
    compare = (d / "compare.md").read_text() if (d / "compare.md").exists() else ""
    rows: list[Row] = []
    if compare:
        for r in five_column_rows(section(compare, "Targets"), ""):
            r[5] = "short-term.md" if "short-term" in r[0] else "search.md" if "search" in r[0] else "ingest-footprint.md"
            rows.append(r)
    else:
        rows.append(missing("short-term and episode search floors, disk (`compare`)", "search.md"))
    if (d / "mcp-load.json").exists():
        rows += mcp_rows(d / "mcp-load.json")
    elif (d / "mcp-load.md").exists():
        rows += mcp_md_rows((d / "mcp-load.md").read_text())
    else:
        rows.append(missing("MCP bounded loopback load (`mcp-load`)", "mcp.md"))
    if (d / "node.md").exists():
        rows += goal_status_rows((d / "node.md").read_text(), "node.md", "Node")
    else:
        rows.append(missing("Node binding targets", "node.md"))
    if (d / "footprint.md").exists():
        # Its one five-column table: target | size | measured | goal | status.
        rows += five_column_rows((d / "footprint.md").read_text().splitlines(), "footprint.md")
    else:
        rows.append(missing("footprint: RSS and disk per short episode", "footprint.md"))
    machine = [line[2:] for line in section(compare, "Machine") if line.startswith("- ")]

    met = sum(1 for r in rows if r[4] == "met")
    missed = sum(1 for r in rows if "missed" in r[4])
    out = [
        "# Benchmarks",
        "",
        "<!-- Generated by benches/summary.py from the results of `make bench` (scripts/bench.sh);",
        "     edit the generator or the pages under docs/benchmarks/, not this file. -->",
        "",
        "Memstrata measured against the floor it is built on (raw sled, raw tantivy) and against",
        "what a developer would pick instead (SQLite FTS5, better-sqlite3, the reference MCP memory",
        "server), side by side in one run. Ratios compare engines interleaved in one process, so",
        "machine noise hits both sides; absolute times on a shared 2-core VM move from run to run.",
        "Nothing fails on a missed target: the table reports. How each figure is measured, the",
        "full tables and why a target is met or missed are on the topic pages below.",
        "",
        "## This run",
        "",
        f"- Date: {env.get('RUN_DATE', 'unknown')}; commit `{env.get('RUN_COMMIT', 'unknown')}`; "
        f"tiers {env.get('RUN_SIZES', '?').replace(',', ', ')} episodes; {env.get('RUN_ELAPSED', '?')} s.",
    ]
    if env.get("RUN_LOAD_BEFORE"):
        out.append(f"- Load average before {env['RUN_LOAD_BEFORE']}, after {env.get('RUN_LOAD_AFTER', '?')}.")
    out += [f"- {m}" for m in machine] or ["- Machine: not recorded (no `compare.md`)."]
    if env.get("RUN_NOTE"):
        out += ["", env["RUN_NOTE"]]
    out += [
        "",
        "## Targets",
        "",
        "| target | size | measured | goal | status | page |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        status = r[4] if r[4] != "missed" else "**missed**"
        page = f"[{r[5].removesuffix('.md')}](benchmarks/{r[5]})" if r[5] else "–"
        out.append("| " + " | ".join(r[:4] + [status, page]) + " |")
    out += ["", f"{met} met, {missed} missed.", ""]

    quick = d / "quick" / "report.md"
    if quick.exists():
        text = quick.read_text()
        first = next((line for line in text.splitlines() if line.startswith("Commit ")), "")
        qrows = five_column_rows(text.splitlines(), "")
        qmet = sum(1 for r in qrows if r[4] == "met")
        qmissed = sum(1 for r in qrows if "missed" in r[4])
        misses = [f"{r[0]} ({r[1]}: {r[2]})" for r in qrows if "missed" in r[4]]
        out += [
            "## Last quick run (`make bench-quick`)",
            "",
            f"{first.split(';')[0]}: {qmet} met, {qmissed} missed"
            + (f" — {'; '.join(misses)}." if misses else "."),
            "The full table is `target/bench/quick/report.md`.",
            "",
        ]
    out += ["## Topic pages", ""]
    out += [f"- [{title}](benchmarks/{page}): {what}" for page, title, what in PAGES]
    out += [
        "- [Retrieval quality, current evaluation](benchmarks-retrieval.md)",
        "",
        "## Reproduce",
        "",
        "```sh",
        "make bench          # 10k and 100k tiers, every section; BENCH_FULL=1 adds 1M (~25 min more)",
        "make bench-quick    # the target table in a few minutes (10k, 5 s per load row)",
        "BENCH_ASSEMBLE_ONLY=1 make bench   # rewrite this page from target/bench without measuring",
        "```",
        "",
        "The run's full tables stay in `target/bench/*.md`; the topic pages quote the current ones.",
    ]
    return "\n".join(out) + "\n"


def main() -> None:
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    results, target = Path(sys.argv[1]), Path(sys.argv[2])
    text = render(results)
    target.write_text(text)
    print(f"summary: wrote {target} ({len(text.splitlines())} lines)")


if __name__ == "__main__":
    main()
