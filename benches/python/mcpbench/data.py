"""What every part sends: the facts (from `compare binding-data`) and the search words."""

from __future__ import annotations

from typing import Any

# One word of each query of the data file; filled by `mcp_latency.main` before any part runs.
WORDS: list[str] = []


def fact(data: dict[str, Any], i: int) -> dict[str, Any]:
    kinds = ["person", "project", "service", "decision", "incident", "tool"]
    kv = data["kv"]
    obs = [kv[(i * 3 + j) % len(kv)][1]["text"] for j in range(3)]
    return {"name": f"fact-{i:05}", "entityType": kinds[i % len(kinds)], "observations": obs}
