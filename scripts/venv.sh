#!/usr/bin/env bash
# Create (or refresh) the project's virtualenv at .venv with the test tools.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.memstrata-tools-v2
if [ ! -f "$stamp" ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet "maturin>=1.7,<2" "pytest>=8" "mypy>=1.10" "mcp>=1.9" "httpx>=0.27" \
    "trustme>=1.1" "pyjwt[crypto]>=2.8"
  touch "$stamp"
fi
