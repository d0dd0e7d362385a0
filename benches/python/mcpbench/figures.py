"""Percentiles and durations as the tables print them."""

from __future__ import annotations


def pct(xs: list[int], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def fmt_ns(ns: float) -> str:
    if ns < 1_000_000:
        return f"{ns / 1e3:.0f} µs"
    if ns < 1_000_000_000:
        return f"{ns / 1e6:.2f} ms"
    return f"{ns / 1e9:.2f} s"
