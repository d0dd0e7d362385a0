#!/usr/bin/env bash
# Prefixes every line of stdin with the time elapsed since this filter started, as
# [mm:ss], so that a log of `make test` shows where the minutes go:
#   make test 2>&1 | bash scripts/stamp.sh
# Use it with `set -o pipefail` so that the exit status stays the producer's.
SECONDS=0
while IFS= read -r line || [ -n "$line" ]; do
  printf '[%02d:%02d] %s\n' $((SECONDS / 60)) $((SECONDS % 60)) "$line"
done
