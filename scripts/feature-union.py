#!/usr/bin/env python3
"""Check that every cargo invocation of `make test` / `make dist` builds the core with one
feature set (feature-union/Cargo.toml), and list what differs when it does not.

    python3 scripts/feature-union.py

For each invocation it asks cargo for the unit graph (`--unit-graph`, nightly-only, so it
runs `cargo +nightly`; nothing is compiled) and hashes the core's library unit with every
unit below it (package, features, profile settings). One hash per profile means the core
compiles once per profile. Otherwise it prints, per dependency, the union of the features
the invocations ask for: copy those into feature-union/Cargo.toml (both tables)."""

import hashlib
import json
import os
import subprocess
import sys

INVOCATIONS = {
    "test-rust": ["test", "--workspace", "--exclude", "memstrata-python", "--exclude", "memstrata-benches",
                  "--exclude", "memstrata-node", "--exclude", "memstrata-ffi", "--exclude", "memstrata-uniffi-bindgen",
                  "--no-run"],
    "test-rust-pg": ["test", "-p", "memstrata", "--features", "postgres", "--no-run"],
    "test-mcp-pg": ["test", "-p", "memstrata-mcp", "--test", "postgres", "--no-run"],
    "test-mcp": ["test", "-p", "memstrata-mcp", "--no-run"],
    "maturin (dev)": ["build", "-p", "memstrata-python", "--lib"],
    "build-dev.mjs": ["build", "-p", "memstrata-node"],
    "test-kotlin": ["test", "-p", "memstrata-ffi", "-p", "memstrata-uniffi-bindgen", "--no-run"],
    "generate.sh": ["build", "-p", "memstrata-ffi", "-p", "memstrata-uniffi-bindgen"],
    "test-all (benches)": ["build", "-p", "memstrata-benches", "--all-targets", "--features", "postgres"],
    "dist (npm)": ["build", "--release", "-p", "memstrata-node"],
    "dist (jar)": ["build", "--release", "-p", "memstrata-ffi"],
    "maturin (release)": ["build", "--release", "-p", "memstrata-python", "--lib"],
    "maturin bin (release)": ["build", "--release", "-p", "memstrata-mcp", "--bin", "memstrata-mcp"],
}
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def core_units(args):
    env = dict(os.environ, CARGO_PROFILE_DEV_DEBUG="0")
    out = subprocess.run(["cargo", "+nightly", *args, "--unit-graph", "-Z", "unstable-options"],
                         cwd=ROOT, capture_output=True, text=True, env=env)
    if out.returncode:
        sys.exit(out.stderr)
    units = json.loads(out.stdout)["units"]
    memo = {}

    def sig(i):
        if i not in memo:
            u = units[i]
            prof = {k: v for k, v in u["profile"].items() if k != "name"}
            deps = sorted(sig(d["index"]) for d in u["dependencies"])
            blob = json.dumps([u["pkg_id"], u["target"]["kind"], prof, u["mode"], u["features"], deps])
            memo[i] = hashlib.sha1(blob.encode()).hexdigest()[:12]
        return memo[i]

    found, feats = {}, {}

    def walk(i, seen):
        if i in seen:
            return
        seen.add(i)
        u = units[i]
        if u["mode"] == "build":
            feats.setdefault(u["pkg_id"].split("#")[-1], set()).add(tuple(u["features"]))
        for d in u["dependencies"]:
            walk(d["index"], seen)

    seen = set()
    for i, u in enumerate(units):
        if u["pkg_id"].split("#")[0].endswith("/core") and u["target"]["kind"] == ["lib"] and u["mode"] == "build":
            found.setdefault(u["profile"]["name"].replace("test", "dev"), set()).add(sig(i))
            walk(i, seen)
    return found, feats


def main():
    per_profile, all_feats = {}, {}
    for name, args in INVOCATIONS.items():
        found, feats = core_units(args)
        for prof, sigs in found.items():
            for s in sigs:
                per_profile.setdefault(prof, {}).setdefault(s, []).append(name)
        for pkg, fs in feats.items():
            all_feats.setdefault(pkg, {})[name] = fs
    ok = True
    for prof, sigs in sorted(per_profile.items()):
        print(f"{prof}: the core builds {len(sigs)} way(s)")
        for s, names in sigs.items():
            print(f"  {s}: {', '.join(names)}")
        ok &= len(sigs) == 1
    if not ok:
        print("\nfeatures that differ between invocations (union to add to feature-union/Cargo.toml):")
        for pkg, by in sorted(all_feats.items()):
            if len({frozenset(v) for v in by.values()}) > 1:
                union = sorted({f for v in by.values() for fs in v for f in fs})
                print(f"  {pkg}: {union}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
