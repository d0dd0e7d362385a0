"""The target table of `make bench-quick` (scripts/bench-quick.sh): measured / goal /
met-missed for every target the quick run measures. It reports; it never fails on a
missed target (exit status 0 whatever the figures).

    python3 quick_report.py OUT_DIR LOAD_BEFORE LOAD_AFTER ELAPSED_S COMMIT

Reads OUT_DIR/compare.md (the `## Targets` table of `compare`), OUT_DIR/mixed.jsonl
(`compare mixed-row` figures, one JSON object a line) and OUT_DIR/mcp-load.json
(`mcp-load --json`, benches/src/bin/mcp_load/), prints the table and writes OUT_DIR/report.md.
Standard library only.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any


def fmt_ns(ns: float | None) -> str:
    if ns is None:
        return "–"
    if ns < 1_000:
        return f"{ns:.0f} ns"
    if ns < 1_000_000:
        return f"{ns / 1e3:.1f} µs"
    if ns < 1_000_000_000:
        return f"{ns / 1e6:.2f} ms"
    return f"{ns / 1e9:.2f} s"


def compare_targets(md: str) -> list[list[str]]:
    """Rows of the `## Targets` table: target, size, measured, goal, status."""
    rows, inside = [], False
    for line in md.splitlines():
        if line.startswith("## "):
            inside = line.strip() == "## Targets"
            continue
        if inside and line.startswith("| ") and not line.startswith("| target"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) == 5:
                rows.append(cells)
    return rows


def main() -> None:
    out, load_before, load_after, elapsed, commit = sys.argv[1:6]
    d = Path(out)
    rows: list[list[str]] = []  # target, size, measured, goal, status

    cmp = d / "compare.md"
    if cmp.exists():
        rows += compare_targets(cmp.read_text())
    else:
        rows.append(["short-term and episode search floors (`compare`)", "–", "not measured", "–", "–"])

    mixed: dict[str, dict[str, Any]] = {}
    if (d / "mixed.jsonl").exists():
        for line in (d / "mixed.jsonl").read_text().splitlines():
            if line.strip():
                r = json.loads(line)
                mixed[r["mode"]] = r
    m, soft, wo = mixed.get("Mixed"), mixed.get("MixedSoftSearchCommits"), mixed.get("WritesOnly")
    if m:
        p = m["all"]
        rows.append([f"in process, {m['threads']} threads on one `Memory`, mixed 20/60/20: calls/s, "
                     "p50 / p95 / p99", "300 + writes",
                     f"{m['rate']:.0f}/s, {fmt_ns(p[0])} / {fmt_ns(p[1])} / {fmt_ns(p[2])}",
                     "(reported)", "–"])
        if wo:
            rows.append(["in process: mixed ÷ writes only (calls/s)", "300 + writes",
                         f"{m['rate'] / wo['rate']:.2f}× ({wo['rate']:.0f}/s writes only)", "(reported)", "–"])
        if soft:
            rows.append(["in process: as shipped ÷ a soft commit per search (calls/s)", "300 + writes",
                         f"{m['rate'] / soft['rate']:.2f}× ({soft['rate']:.0f}/s before)", "(reported)", "–"])
        errors = sum(r["errors"] for r in mixed.values())
        rows.append(["in process: every search sees its thread's last acknowledged write", "300 + writes",
                     f"{errors} misses or errors", "0", "met" if errors == 0 else "**missed**"])
    else:
        rows.append(["in-process mixed load", "–", "not measured", "(reported)", "–"])

    mcp = d / "mcp-load.json"
    if mcp.exists():
        for r in json.loads(mcp.read_text()):
            if r["baseline"]:
                continue
            target = r["target"]
            goal, _, status = target.rpartition(": ")
            if r["rate"] is None:
                measured = f"not measured ({r['failure'] or 'no call completed'})"
            else:
                measured = (f"{r['rate']:.0f}/s, p95 {fmt_ns(r['p95_ns'])}, p99 {fmt_ns(r['p99_ns'])}, "
                            f"{r['errors']} errors, {r['lost'] if r['lost'] is not None else '–'} lost")
            rows.append([f"MCP load: {r['label']}", f"C = {r['clients']}", measured, goal or "–",
                         status or "–"])
    elif os.environ.get("QUICK_MCP", "1") != "0":
        rows.append(["MCP bounded loopback load (issue #14)", "–", "not measured (see the log)", "–", "–"])

    met = sum(1 for r in rows if r[4] == "met")
    missed = sum(1 for r in rows if "missed" in r[4])
    lines = [
        "## Quick targets (`make bench-quick`)\n",
        f"Commit `{commit}`, {elapsed} s; load average before {load_before}, after {load_after} "
        f"({os.cpu_count()} cores). Ratios are measured interleaved in one process; absolute rates "
        "move with the machine's load. This table reports; nothing here fails on a missed target.\n",
        "| target | size | measured | goal | status |",
        "|---|---|---|---|---|",
    ] + ["| " + " | ".join(r) + " |" for r in rows] + ["", f"{met} met, {missed} missed.", ""]
    text = "\n".join(lines)
    (d / "report.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
