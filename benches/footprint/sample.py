"""Where the resident memory of one footprint run goes, sampled over time.

Runs one measurement of probe.py (its `--child` mode, same arguments) and
reads the child's /proc/<pid>/smaps every 100 ms, splitting the resident
memory into anonymous memory (heap, stacks), the extension's own mappings
(`_memstrata*.so`: code pages), the search index files mapped by the store
(`/index/` in the path) and other files. Prints the probe's own figures,
the split at the largest sampled total and the largest value of each part;
with TIMELINE=k every k-th sample too. Linux only.

    PYTHONPATH=<installed wheel> python benches/footprint/sample.py -n=100000 --chars=100 \\
        --opt=low_memory=true --mode=percall
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

PROBE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "probe.py")
PARTS = ("anon", "extension", "index", "otherfile")


def sample(pid: int) -> dict | None:
    parts = dict.fromkeys(PARTS, 0)
    cur = "anon"
    try:
        with open(f"/proc/{pid}/smaps") as f:
            for line in f:
                head = line.split(None, 1)[0]
                if "-" in head and not head.endswith(":"):
                    fields = line.split()
                    path = fields[5] if len(fields) > 5 else ""
                    if "_memstrata" in path:
                        cur = "extension"
                    elif "/index/" in path:
                        cur = "index"
                    elif path.startswith("/"):
                        cur = "otherfile"
                    else:
                        cur = "anon"
                elif line.startswith("Rss:"):
                    parts[cur] += int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        return None
    return parts


def mib(kib: int) -> float:
    return round(kib / 1024, 1)


def main() -> None:
    child = subprocess.Popen([sys.executable, PROBE, "--child", *sys.argv[1:]], stdout=subprocess.PIPE, text=True)
    samples = []
    t0 = time.time()
    while child.poll() is None:
        s = sample(child.pid)
        if s:
            samples.append((time.time() - t0, s))
        time.sleep(0.1)
    out = child.stdout.read().strip().splitlines()
    if child.returncode != 0 or not out or not samples:
        raise SystemExit(f"probe child failed (exit {child.returncode})")
    res = json.loads(out[-1])
    print(f"probe: peak +{res['peak_added_mib']:.1f} MiB, end of ingest +{res['end_added_mib']:.1f}, "
          f"after close +{res['close_added_mib']:.1f}, {res['eps']:.0f} episodes/s")
    t, top = max(samples, key=lambda x: sum(x[1].values()))
    print(f"largest sampled total at {t:.1f} s (MiB, absolute): "
          + ", ".join(f"{k} {mib(v)}" for k, v in top.items()) + f"; total {mib(sum(top.values()))}")
    for k in PARTS:
        tk, sk = max(samples, key=lambda x: x[1][k])
        print(f"largest {k}: {mib(sk[k])} MiB at {tk:.1f} s")
    step = int(os.environ.get("TIMELINE", "0"))
    if step > 0:
        for t, s in samples[::step]:
            print(f"{t:6.1f} s  " + "  ".join(f"{k} {mib(v)}" for k, v in s.items()))


if __name__ == "__main__":
    main()
