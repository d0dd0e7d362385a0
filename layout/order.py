#!/usr/bin/env python3
"""The code-layout order file: made from callgrind and perf profiles, checked against a built library.

    python3 layout/order.py make OUT OBJECT PROFILE...
        The functions of OBJECT (a file name such as _memstrata.abi3.so) that ran in
        the PROFILEs, written to OUT one symbol per line: the first profile's
        functions first, hottest first, then each later profile's functions not
        listed yet. A profile is callgrind's output (run with --demangle=no) or, if
        its name ends in `.perf`, `perf script -F event,addr,ip,sym,dso
        --no-demangle` of a native run recorded with a clock event and page faults.

    python3 layout/order.py check LIBRARY ORDER [--min-found F] [--max-spread S]
        How the ordered functions lie in LIBRARY (its symbol table, through `nm`): how
        many of ORDER's symbols it defines, and how many 64 KiB blocks of its code
        those functions span against the fewest they could. Exits 1 if fewer than
        F (default 0.5) of the symbols are found, or the span is more than S (default
        1.5) times the fewest: the order was not applied, or is stale.

Standard library only. See layout/README.md.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

BLOCK = 64 * 1024  # Linux maps a faulting file page's cached neighbours in 64 KiB blocks


def _named(rest: str, table: dict[str, str]) -> str:
    """callgrind's name compression: `(id) name` defines, `(id)` refers."""
    m = re.match(r"\((\d+)\)(?: (.*))?$", rest)
    if not m:
        return rest
    if m.group(2) is not None:
        # `'2`, `'3`: callgrind's mark for a function's deeper recursion levels.
        table[m.group(1)] = re.sub(r"'\d+$", "", m.group(2))
    return table[m.group(1)]


def own_costs(profile: Path, obj: str) -> dict[str, int]:
    """Every function of `obj` seen in the profile (called or calling), with the
    instructions it ran itself."""
    objs: dict[str, str] = {}
    fns: dict[str, str] = {}
    cost: dict[str, int] = {}
    cur_ob = cur_fn = ""
    callee_ob: str | None = None
    after_calls = False
    with open(profile, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("ob="):
                cur_ob = _named(line[3:], objs)
            elif line.startswith("fn="):
                cur_fn = _named(line[3:], fns)
                if cur_ob.endswith(obj):
                    cost.setdefault(cur_fn, 0)
            elif line.startswith("cob="):
                callee_ob = _named(line[4:], objs)
            elif line.startswith("cfn="):
                callee = _named(line[4:], fns)
                if (callee_ob or cur_ob).endswith(obj):
                    cost.setdefault(callee, 0)
                callee_ob = None
            elif line.startswith("calls="):
                after_calls = True  # the next cost line is the call's inclusive cost
            elif line[:1].isdigit() or line[:1] in "+-*":
                if after_calls:
                    after_calls = False
                    continue
                parts = line.split()
                if len(parts) >= 2 and cur_ob.endswith(obj):
                    cost[cur_fn] = cost.get(cur_fn, 0) + int(parts[1])
    return {k: v for k, v in cost.items() if orderable(k)}


# The C runtime's start-up and tear-down code: not in .text, so not ordered.
_CRT = {"_init", "_fini", "frame_dummy", "__do_global_dtors_aux", "register_tm_clones", "deregister_tm_clones"}


def orderable(name: str) -> bool:
    """A function the linker can place: named (not a bare address such as a PLT
    stub) and in .text."""
    return not name.startswith("0x") and name != "[unknown]" and name not in _CRT


_PERF_LINE = re.compile(
    # event: addr [addr's symbol (dso)] ip symbol (dso); a clock sample's addr is 0, unnamed
    r"\s*(\S+):\s+([0-9a-f]+)\s+(?:(.*?)\s+\((\S*)\)\s+)?([0-9a-f]+)\s+(.*?)\s+\((\S*)\)\s*$"
)


def perf_costs(dump: Path, obj: str) -> dict[str, int]:
    """Functions of `obj` in a native run recorded by perf (`perf script -F
    event,addr,ip,sym,dso --no-demangle`): the samples of a clock event (how many),
    and the instruction fetches that faulted a page of code in (what valgrind's
    run missed: code chosen by CPU features it does not emulate, such as AVX-512,
    slow paths taken only under contention, paths that depend on timing)."""
    cost: dict[str, int] = {}
    with open(dump, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = _PERF_LINE.match(line)
            if not m:
                continue
            event, addr, ip, sym, dso = m.group(1), int(m.group(2), 16), int(m.group(5), 16), m.group(6), m.group(7)
            if not dso.endswith(obj) or not orderable(sym):
                continue
            if event.startswith("page-faults") and not ip <= addr < ip + 16:
                continue  # a data access, not the fetch of this function's code
            cost[sym] = cost.get(sym, 0) + 1
    return cost


def make(out: Path, obj: str, profiles: list[Path]) -> None:
    order: list[str] = []
    seen: set[str] = set()
    for profile in profiles:
        costs = perf_costs(profile, obj) if profile.suffix == ".perf" else own_costs(profile, obj)
        for name, _ in sorted(costs.items(), key=lambda kv: (-kv[1], kv[0])):
            if name not in seen:
                seen.add(name)
                order.append(name)
        print(f"{profile.name}: {len(costs)} functions of {obj}, {len(order)} listed so far")
    out.write_text("".join(f"{name}\n" for name in order))
    print(f"wrote {out} ({len(order)} symbols)")


def code_symbols(library: Path) -> dict[str, list[tuple[int, int]]]:
    """name -> [(address, size)] of every defined function in the symbol table."""
    nm = subprocess.run(
        ["nm", "--defined-only", "--print-size", str(library)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    syms: dict[str, list[tuple[int, int]]] = {}
    for line in nm.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[2] in ("t", "T"):
            syms.setdefault(parts[3], []).append((int(parts[0], 16), int(parts[1], 16)))
    return syms


def placement(order: list[str], syms: dict[str, list[tuple[int, int]]]) -> tuple[list[str], int, int, int]:
    """(the ordered functions the library defines, their bytes, the 64 KiB blocks
    they span, the fewest blocks those bytes could span)."""
    found = [name for name in order if name in syms]
    size = 0
    blocks: set[int] = set()
    for name in found:
        for addr, n in syms[name]:
            size += n
            blocks.update(range(addr // BLOCK, (addr + max(n, 1) - 1) // BLOCK + 1))
    return found, size, len(blocks), max(1, -(-size // BLOCK))


def check(library: Path, order_file: Path, min_found: float, max_spread: float) -> int:
    order = [line.strip() for line in order_file.read_text().splitlines() if line.strip()]
    found, size, blocks, fewest = placement(order, code_symbols(library))
    share = len(found) / max(1, len(order))
    spread = blocks / fewest
    print(
        f"{library.name}: {len(found)} of {len(order)} ordered functions found ({share:.0%}), "
        f"{size / 2**20:.2f} MiB of code in {blocks} blocks of 64 KiB "
        f"(fewest possible {fewest}: {spread:.2f}x)"
    )
    ok = True
    if share < min_found:
        print(f"layout: only {share:.0%} of the order file is in the library (min {min_found:.0%}): "
              "regenerate it (layout/generate.sh)")
        ok = False
    if spread > max_spread:
        print(f"layout: the ordered functions span {spread:.2f}x the fewest blocks (max {max_spread}x): "
              "the order file was not applied to this library")
        ok = False
    return 0 if ok else 1


def main(argv: list[str]) -> int:
    if len(argv) >= 4 and argv[0] == "make":
        make(Path(argv[1]), argv[2], [Path(p) for p in argv[3:]])
        return 0
    if len(argv) >= 3 and argv[0] == "check":
        opts = {"--min-found": 0.5, "--max-spread": 1.5}
        rest = argv[3:]
        while rest:
            if rest[0] not in opts or len(rest) < 2:
                print(__doc__)
                return 2
            opts[rest[0]] = float(rest[1])
            rest = rest[2:]
        return check(Path(argv[1]), Path(argv[2]), opts["--min-found"], opts["--max-spread"])
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
