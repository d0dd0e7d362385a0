#!/usr/bin/env bash
# actionlint over .github/workflows/ (run by `make lint`). Installed on first use with
# `go install` from the Go module proxy into .tools/actionlint/ (pinned version below);
# shellcheck, when on PATH, also checks the workflows' `run:` scripts.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
VERSION=v1.7.12
BIN=$REPO/.tools/actionlint/$VERSION/actionlint
if [ ! -x "$BIN" ]; then
  command -v go >/dev/null || { echo "actionlint: Go is needed to install actionlint $VERSION" >&2; exit 1; }
  echo "actionlint: installing github.com/rhysd/actionlint $VERSION into .tools/actionlint/" >&2
  GOBIN=$(dirname "$BIN") GOFLAGS=-mod=mod go install "github.com/rhysd/actionlint/cmd/actionlint@$VERSION"
fi
"$BIN" -no-color .github/workflows/*.yml
echo "actionlint $VERSION: $(ls .github/workflows/*.yml | wc -l) workflow(s) clean"
