"""Tests of layout/order.py (run by scripts/test-python.sh with pytest)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import order  # noqa: E402

OBJ = "_memstrata.abi3.so"

# A callgrind profile in its compressed form: `(id) name` defines a name, `(id)` refers
# to it; `calls=` is followed by the call's inclusive cost, which is not the caller's own.
CALLGRIND = """\
version: 1
events: Ir
ob=(1) /usr/lib/libc.so.6
fn=(1) memcpy
0 500
ob=(2) /site/memstrata/_memstrata.abi3.so
fn=(2) _ZN4sled4tree4Tree6insert17habcE
0 40
cob=(1)
cfn=(1)
calls=1 0
0 500
cfn=(3) _ZN7tantivy5index3add17hdefE
calls=2 0
0 9000
fn=(3)
0 70
fn=(4) _ZN7tantivy5index3add17hdefE'2
0 30
fn=(5) 0x00000000003a73b0
0 900
fn=(6) frame_dummy
0 900
fn=(7) _ZN4pyo35close17h123E
0 5
"""

PERF = """\
cpu-clock/freq=20000/:                0     7f00aa001000 _ZN9crc32fast6avx51217h1E (/site/memstrata/_memstrata.abi3.so)
cpu-clock/freq=20000/:                0     7f00aa001010 _ZN9crc32fast6avx51217h1E (/site/memstrata/_memstrata.abi3.so)
cpu-clock/freq=20000/:                0     7f00bb000000 memcpy (/usr/lib/libc.so.6)
page-faults/period=1/:     7f00aa002000 _ZN11parking_lot11unlock_slow17h2E (/site/memstrata/_memstrata.abi3.so)     7f00aa002000 _ZN11parking_lot11unlock_slow17h2E (/site/memstrata/_memstrata.abi3.so)
page-faults/period=1/:     7f00cc000000 [unknown] (/site/memstrata/_memstrata.abi3.so)     7f00aa003000 _ZN4sled5flush17h3E (/site/memstrata/_memstrata.abi3.so)
"""


def test_callgrind_own_costs(tmp_path: Path) -> None:
    profile = tmp_path / "ingest.callgrind"
    profile.write_text(CALLGRIND)
    costs = order.own_costs(profile, OBJ)
    # Own cost only (the calls' inclusive costs are not the caller's); recursion
    # levels (`'2`) fold into the function; another object's functions, bare
    # addresses and the C runtime's are left out.
    assert costs == {
        "_ZN4sled4tree4Tree6insert17habcE": 40,
        "_ZN7tantivy5index3add17hdefE": 100,
        "_ZN4pyo35close17h123E": 5,
    }


def test_perf_costs_count_samples_and_code_faults_only(tmp_path: Path) -> None:
    dump = tmp_path / "native.perf"
    dump.write_text(PERF)
    # The data fault (address far from the instruction) does not name its function.
    assert order.perf_costs(dump, OBJ) == {
        "_ZN9crc32fast6avx51217h1E": 2,
        "_ZN11parking_lot11unlock_slow17h2E": 1,
    }


def test_make_lists_each_profile_hottest_first_without_repeats(tmp_path: Path) -> None:
    first = tmp_path / "ingest.callgrind"
    first.write_text(CALLGRIND)
    second = tmp_path / "native.perf"
    second.write_text(PERF)
    out = tmp_path / "out.order"
    order.make(out, OBJ, [first, second, first])
    assert out.read_text().splitlines() == [
        "_ZN7tantivy5index3add17hdefE",
        "_ZN4sled4tree4Tree6insert17habcE",
        "_ZN4pyo35close17h123E",
        "_ZN9crc32fast6avx51217h1E",
        "_ZN11parking_lot11unlock_slow17h2E",
    ]


def test_placement_counts_blocks_against_the_fewest() -> None:
    kib = 1024
    listed = ["a", "b", "c", "missing"]
    together = {"a": [(0, 40 * kib)], "b": [(40 * kib, 40 * kib)], "c": [(80 * kib, 40 * kib)], "x": [(0, 1)]}
    found, size, blocks, fewest = order.placement(listed, together)
    assert (found, size, blocks, fewest) == (["a", "b", "c"], 120 * kib, 2, 2)
    spread = {"a": [(0, 40 * kib)], "b": [(640 * kib, 40 * kib)], "c": [(6400 * kib, 40 * kib)]}
    _, _, blocks, fewest = order.placement(listed, spread)
    assert (blocks, fewest) == (3, 2)
