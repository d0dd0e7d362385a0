#!/usr/bin/env bash
# `make bench`: regenerate every figure and write docs/benchmarks.md.
#
#   1. build the harness (release) and run `compare`: Memstrata vs raw sled,
#      raw tantivy and SQLite FTS5 at 10k and 100k episodes (BENCH_FULL=1 adds
#      1M), plus session compression levels;
#      then the cost of encryption at rest (bin `encryption`: plaintext vs sealed
#      store, same workload, rounds interleaved; bin `encryption_pg`: the same on
#      PostgreSQL under scripts/pg-test.sh, with the keyed store's ranking overlap), and the cost of hybrid search
#      (bin `hybrid`: BM25 only vs BM25 + vectors at 100k episodes × 384 dims),
#      duplicate detection on write and the cost of as-of reads (examples
#      `dedup_bench`, `asof_bench`: target/bench/dedup.md);
#   2. Python binding per-call overhead vs Rust (release wheel, repo .venv);
#   3. MCP tools/call latency over stdio / HTTP / WebSocket and the reference
#      @modelcontextprotocol/server-memory (npm), an end-to-end store-then-search
#      workload against it, the bounded loopback load of issue #14 from the Rust
#      client `mcp-load` (BENCH_MCP_LOAD_SECONDS per row, default 10), and 50
#      concurrent writers (what each server loses);
#   4. Node binding (bindings-node/bench/run.sh): per-call overhead vs Rust,
#      search vs better-sqlite3 + FTS5, store-then-search vs the reference MCP
#      server through the MCP TypeScript SDK client, at 10k and 100k episodes;
#   5. footprint (scripts/bench-footprint.sh): peak and after-close RSS and disk
#      per episode for chat-sized (100 chars) and document-sized (2,000 chars)
#      episodes through the Python binding, one fresh process each, next to
#      SQLite FTS5 (BENCH_FULL=1 adds the 1M chat-sized tier);
#   6. retrieval quality (benches/retrieval/run.sh): recall@1/5/10 and MRR of
#      BM25, SQLite FTS5, vector-only and hybrid fusions on the convmem set,
#      all-MiniLM-L6-v2 (int8 ONNX from PyPI) embeddings cached on disk;
#   7. write docs/benchmarks.md, the one-page summary (benches/summary.py): every
#      target with measured / goal / status, machine, commit and date, links to the
#      per-topic pages docs/benchmarks/*.md (method and findings, kept by hand).
#
# Environment: BENCH_FULL=1 (add the 1M tier, ~25 more minutes),
# BENCH_SIZES=10000,30000 (override the tiers), BENCH_CRITERION=1 (also run
# the criterion micro-benches, not part of the document), BENCH_OUT=FILE
# (write somewhere other than docs/benchmarks.md), BENCH_DIR (scratch space
# for the stores; default target/bench/scratch), BENCH_ASSEMBLE_ONLY=1
# (measure nothing: rebuild the document from the last run's results).
# No timing assertions anywhere.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
export CARGO_PROFILE_DEV_DEBUG=${CARGO_PROFILE_DEV_DEBUG:-0}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$REPO/target}
export CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never}
OUT=$CARGO_TARGET_DIR/bench
SCRATCH=${BENCH_DIR:-$OUT/scratch}
DOC=${BENCH_OUT:-$REPO/docs/benchmarks.md}
PYTHON_MD=$OUT/python.md
MCP_MD=$OUT/mcp.md
MCP_CONC_MD=$OUT/mcp-concurrency.md
MCP_LOAD_MD=$OUT/mcp-load.md
NODE_MD=$OUT/node.md
ENC_MD=$OUT/encryption.md
HYBRID_MD=$OUT/hybrid.md
DEDUP_MD=$OUT/dedup.md
RETRIEVAL_MD=$OUT/retrieval.md
FOOTPRINT_MD=$OUT/footprint.md
mkdir -p "$OUT" "$SCRATCH"

assemble() {
  # The one-page summary (targets, measured, met or missed, machine, commit, date);
  # the method and the findings live in docs/benchmarks/*.md, this run's full tables
  # stay in target/bench/*.md.
  python3 benches/summary.py "$OUT" "$DOC"
  if [ -s "$OUT/notes.md" ]; then
    echo "== bench: notes on this run (not in the summary):"
    cat "$OUT/notes.md"
  fi
}

if [ "${BENCH_ASSEMBLE_ONLY:-0}" = 1 ]; then
  assemble
  exit 0
fi
rm -f "$OUT/compare.md" "$ENC_MD" "$HYBRID_MD" "$DEDUP_MD" "$PYTHON_MD" "$MCP_MD" "$MCP_LOAD_MD" "$MCP_CONC_MD" "$NODE_MD" "$RETRIEVAL_MD" "$FOOTPRINT_MD" "$OUT/stall-backtrace.txt" "$OUT/notes.md" "$OUT/run.env"

if [ -n "${BENCH_SIZES:-}" ]; then
  SIZES=$BENCH_SIZES
elif [ "${BENCH_FULL:-0}" = 1 ]; then
  SIZES=10000,100000,1000000
else
  SIZES=10000,100000
fi
started=$(date +%s)
load_before=$(cut -d' ' -f1-3 /proc/loadavg)

echo "== bench: building the harness (release)"
cargo build --release -p memstrata-benches --bin compare
COMPARE=$CARGO_TARGET_DIR/release/compare

# Unpatched sled 0.34.7 could deadlock under sustained writes (fixed in
# vendor/sled; docs/benchmarks/ingest-footprint.md). `compare` still exits 75 when
# nothing progresses for 3 minutes, and the run is retried once; a retry is
# written into the document.
attempt=1
while :; do
  echo "== bench: compare (tiers $SIZES), attempt $attempt"
  set +e
  BENCH_STALL_DUMP=$OUT "$COMPARE" --sizes "$SIZES" --dir "$SCRATCH" --out "$OUT/compare.md" > "$OUT/compare.stdout"
  rc=$?
  set -e
  if [ $rc -eq 0 ]; then break; fi
  if [ $rc -eq 75 ] && [ $attempt -lt 2 ]; then
    echo "- Attempt $attempt of this run stalled (no progress for 3 minutes; see *The sled 0.34.7 deadlock* in docs/benchmarks/ingest-footprint.md; backtrace in \`target/bench/stall-backtrace.txt\`) and was restarted from scratch." >> "$OUT/notes.md"
    attempt=$((attempt + 1))
    rm -rf "${SCRATCH:?}"/memstrata-bench-*
    continue
  fi
  echo "compare failed (exit $rc)" >&2
  exit $rc
done

# ---- Encryption at rest: plaintext vs sealed store, same workload, same run ------
echo "== bench: encryption at rest"
cargo build --release -p memstrata-benches --bin encryption
if "$CARGO_TARGET_DIR/release/encryption" --dir "$SCRATCH" --out "$ENC_MD" > "$OUT/encryption.stdout"; then :; else
  printf '## Encryption at rest: cost\n\nNot measured in this run: `benches/src/bin/encryption.rs` failed (see the `make bench` log).\n\n' > "$ENC_MD"
fi
# The same on PostgreSQL (bin `encryption_pg`: plaintext vs keyed store, ranking
# overlap@10), under a throwaway server (scripts/pg-test.sh), appended to the page.
echo "== bench: encryption at rest on PostgreSQL"
if cargo build --release -p memstrata-benches --features postgres --bin encryption_pg \
  && bash scripts/pg-test.sh "$CARGO_TARGET_DIR/release/encryption_pg" --out "$OUT/encryption-pg.md" > "$OUT/encryption-pg.stdout"; then
  cat "$OUT/encryption-pg.md" >> "$ENC_MD"
else
  printf '## Encryption at rest on PostgreSQL: cost\n\nNot measured in this run: `benches/src/bin/encryption_pg.rs` or its PostgreSQL server failed (see the `make bench` log).\n\n' >> "$ENC_MD"
fi

# ---- Hybrid search cost: BM25 only vs BM25 + vectors, same store, same run -----
# 100k episodes with 384-dimension vectors (HYBRID_N / HYBRID_DIM / HYBRID_QUERIES override).
echo "== bench: hybrid search cost"
cargo build --release -p memstrata-benches --bin hybrid
if BENCH_DIR="$SCRATCH/hybrid" "$CARGO_TARGET_DIR/release/hybrid" > "$HYBRID_MD.tmp"; then
  mv "$HYBRID_MD.tmp" "$HYBRID_MD"
else
  rm -f "$HYBRID_MD.tmp"
  printf '## Hybrid search: cost of the vector list\n\nNot measured in this run: `benches/src/bin/hybrid.rs` failed (see the `make bench` log).\n\n' > "$HYBRID_MD"
fi
rm -rf "${SCRATCH:?}/hybrid"

# ---- Duplicate detection on write: precision / recall and cost per write ------
# The cost of `record` under each on_duplicate policy (keep: no detection), the
# detector's precision and recall (docs/memory-hygiene.md). Full output only.
echo "== bench: duplicate detection on write"
cargo build --release -p memstrata --example dedup_bench
{
  printf '## Duplicate detection on write\n\n```\n'
  "$CARGO_TARGET_DIR/release/examples/dedup_bench" quality benches/retrieval/data
  "$CARGO_TARGET_DIR/release/examples/dedup_bench" cost 3000 unique 5
  "$CARGO_TARGET_DIR/release/examples/dedup_bench" cost 3000 5
  "$CARGO_TARGET_DIR/release/examples/dedup_bench" cost 3000 5 dup
  "$CARGO_TARGET_DIR/release/examples/dedup_bench" cost 3000 real 9
  "$CARGO_TARGET_DIR/release/examples/dedup_bench" cost 20000 unique 3
  "$CARGO_TARGET_DIR/release/examples/dedup_bench" cost 20000 3
  printf '```\n\n'
} > "$DEDUP_MD" 2>&1 || printf '## Duplicate detection on write\n\nNot measured in this run: `core/examples/dedup_bench.rs` failed (see the `make bench` log).\n\n' > "$DEDUP_MD"
# Beside it, the cost of as-of reads (facts with validity): `get` / `query` with
# `as_of` against the plain read, same store, rounds alternated.
echo "== bench: as-of reads"
cargo build --release -p memstrata --example asof_bench
{
  printf '## As-of reads\n\n```\n'
  "$CARGO_TARGET_DIR/release/examples/asof_bench" 2000 5 5
  printf '```\n\n'
} >> "$DEDUP_MD" 2>&1 || printf '## As-of reads\n\nNot measured in this run: `core/examples/asof_bench.rs` failed (see the `make bench` log).\n\n' >> "$DEDUP_MD"

if [ "${BENCH_CRITERION:-0}" = 1 ]; then
  echo "== bench: criterion micro-benches (not part of the document)"
  cargo bench -p memstrata-benches --bench floor
fi

# ---- Python binding ---------------------------------------------------------
if [ -f bindings-python/pyproject.toml ]; then
  echo "== bench: Python binding overhead"
  if (
    set -e
    bash scripts/venv.sh
    rm -rf "$OUT/wheels" "$OUT/pylib"
    .venv/bin/maturin build --quiet --release -m bindings-python/Cargo.toml -o "$OUT/wheels" -i .venv/bin/python
    # Into a private directory, so the .venv's own (test) install is left alone.
    .venv/bin/python -m pip install --quiet --no-deps --target "$OUT/pylib" "$OUT"/wheels/memstrata-*.whl
    "$COMPARE" binding-data "$OUT/binding-data.json"
    PYTHONPATH=$OUT/pylib .venv/bin/python benches/python/binding_overhead.py \
      "$COMPARE" "$OUT/binding-data.json" "$PYTHON_MD" 3
  ); then :; else
    printf '## Python binding: per-call overhead vs Rust\n\nNot measured in this run: building or running the release wheel failed (see the `make bench` log).\n\n' > "$PYTHON_MD"
  fi
else
  printf '## Python binding: per-call overhead vs Rust\n\nPending: `bindings-python/` has not landed yet.\n\n' > "$PYTHON_MD"
fi

# ---- MCP adapter ------------------------------------------------------------
if [ -f mcp-adapter/Cargo.toml ] && grep -q 'name = "memstrata-mcp"' mcp-adapter/Cargo.toml; then
  echo "== bench: MCP tools/call latency"
  if (
    set -e
    bash scripts/venv.sh
    cargo build --release -p memstrata-mcp --bin memstrata-mcp
    [ -f "$OUT/binding-data.json" ] || "$COMPARE" binding-data "$OUT/binding-data.json"
    # The WebSocket client (the MCP SDK has none) goes next to the wheel, not into .venv.
    [ -d "$OUT/pylib/websockets" ] || .venv/bin/python -m pip install --quiet --target "$OUT/pylib" "websockets>=12,<18"
    REF_JS=$OUT/npm/node_modules/@modelcontextprotocol/server-memory/dist/index.js
    if command -v npm > /dev/null && [ ! -f "$REF_JS" ]; then
      npm install --silent --no-audit --no-fund --prefix "$OUT/npm" @modelcontextprotocol/server-memory || true
    fi
    # The bounded loopback load comes from the Rust client below (the Python client
    # process was the bound of its HTTP rows); MCP_ONLY keeps the other parts.
    MCP_ONLY=transports,workload PYTHONPATH=$OUT/pylib .venv/bin/python benches/python/mcp_latency.py \
      "$CARGO_TARGET_DIR/release/memstrata-mcp" "$REF_JS" "$OUT/binding-data.json" "$MCP_MD"
  ); then :; else
    printf '## MCP `tools/call` latency\n\nNot measured in this run: building or running memstrata-mcp or the Python MCP client failed (see the `make bench` log).\n\n' > "$MCP_MD"
  fi
  # The bounded loopback load (issue #14) from the Rust client mcp-load: every transport at
  # 8 clients plus the 64-client HTTP rows, lost writes read back. Binaries copied first,
  # so a concurrent build in a shared target directory cannot swap them mid-run.
  echo "== bench: MCP bounded loopback load (mcp-load)"
  if (
    set -e
    cargo build --release -p memstrata-benches --bin mcp-load -p memstrata-mcp --bin memstrata-mcp
    mkdir -p "$OUT/bin"
    cp "$CARGO_TARGET_DIR/release/mcp-load" "$CARGO_TARGET_DIR/release/memstrata-mcp" "$OUT/bin/"
    "$OUT/bin/mcp-load" "$OUT/bin/memstrata-mcp" --seconds "${BENCH_MCP_LOAD_SECONDS:-10}" --dir "$SCRATCH" \
      --md "$MCP_LOAD_MD" --json "$OUT/mcp-load.json" > /dev/null
  ); then :; else
    printf '### Bounded loopback load (Rust load client)\n\nNot measured in this run: building or running `mcp-load` failed (see the `make bench` log).\n\n' > "$MCP_LOAD_MD"
  fi
  # 50 concurrent writers: what memstrata-mcp and the reference each lose. Exit 3 =
  # memstrata-mcp lost an acknowledged write, 4 = one of its scenarios hung or failed;
  # the table is written either way and kept, and the finding goes to the top of the document.
  echo "== bench: MCP concurrent writers"
  set +e
  PYTHONPATH=$OUT/pylib .venv/bin/python benches/python/mcp_concurrency.py \
    "$CARGO_TARGET_DIR/release/memstrata-mcp" \
    "$OUT/npm/node_modules/@modelcontextprotocol/server-memory/dist/index.js" \
    "$OUT/binding-data.json" "$MCP_CONC_MD"
  rc=$?
  set -e
  if { [ $rc -eq 3 ] || [ $rc -eq 4 ]; } && [ -s "$MCP_CONC_MD" ]; then
    echo "bench: memstrata-mcp lost acknowledged writes or did not finish under 50 concurrent writers (exit $rc): see $MCP_CONC_MD" >&2
    echo "- **memstrata-mcp did not keep every acknowledged write under 50 concurrent writers, or a scenario hung** (see *Concurrent writers* in the MCP section)." >> "$OUT/notes.md"
  elif [ $rc -ne 0 ]; then
    printf '### Concurrent writers: what each server loses\n\nNot measured in this run: `benches/python/mcp_concurrency.py` failed (exit %s; see the `make bench` log).\n\n' "$rc" > "$MCP_CONC_MD"
  fi
else
  printf '## MCP `tools/call` latency\n\nPending: `mcp-adapter/` has not landed yet.\n\n' > "$MCP_MD"
fi

# ---- Node binding -----------------------------------------------------------
# Tiers 10k and 100k in every run (the section took 5.4 min, the 100k tier about 3,
# on the shared 2-core VM at load 7–10; its
# BENCH_NODE_SIZES / BENCH_NODE_MCP override them). Bench-only npm dependencies
# live in bindings-node/bench/package.json, not in the library package.
if [ -f bindings-node/bench/run.sh ] && command -v npm > /dev/null; then
  echo "== bench: Node binding"
  if bash bindings-node/bench/run.sh "$NODE_MD"; then :; else
    printf '## Node binding (`memstrata` on npm)\n\nNot measured in this run: `bindings-node/bench/run.sh` failed (see the `make bench` log).\n\n' > "$NODE_MD"
  fi
fi

# ---- Footprint: resident memory and disk per episode (Python binding) -----
# Reuses the release wheel the Python section installed into $OUT/pylib (builds one otherwise).
if [ -f bindings-python/pyproject.toml ]; then
  echo "== bench: footprint"
  if FOOTPRINT_PYLIB=$OUT/pylib bash scripts/bench-footprint.sh "$FOOTPRINT_MD"; then :; else
    printf '## Footprint: resident memory and disk per episode\n\nNot measured in this run: `scripts/bench-footprint.sh` failed (see the `make bench` log).\n\n' > "$FOOTPRINT_MD"
  fi
fi

# ---- Retrieval quality ------------------------------------------------------
# Reuses the release wheel the Python section installed into $OUT/pylib.
if [ -f bindings-python/pyproject.toml ]; then
  echo "== bench: retrieval quality"
  pylib=
  if [ -f "$OUT/pylib/memstrata/__init__.py" ]; then pylib=$OUT/pylib; fi
  if RETRIEVAL_PYLIB=$pylib bash benches/retrieval/run.sh "$RETRIEVAL_MD"; then :; else
    printf '## Retrieval quality\n\nNot measured in this run: `benches/retrieval/run.sh` failed (see the `make bench` log).\n\n' > "$RETRIEVAL_MD"
  fi
fi

# ---- docs/benchmarks.md -----------------------------------------------------
{
  echo "RUN_DATE='$(date -u +%Y-%m-%dT%H:%MZ)'"
  echo "RUN_ELAPSED='$(($(date +%s) - started))'"
  echo "RUN_SIZES='$SIZES'"
  echo "RUN_COMMIT='$(git rev-parse --short HEAD 2>/dev/null || echo unknown)'"
  echo "RUN_LOAD_BEFORE='$load_before'"
  echo "RUN_LOAD_AFTER='$(cut -d' ' -f1-3 /proc/loadavg)'"
} > "$OUT/run.env"
assemble
