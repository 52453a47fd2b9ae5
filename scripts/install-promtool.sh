#!/usr/bin/env bash
# Installs promtool (Prometheus's rule checker and rule unit-test runner) once, from the Go module
# proxy, into a cache outside the repo, and prints its path. test/platform/prometheus-rules.test.ts runs
# `promtool check rules` and `promtool test rules` on deploy/prometheus with it.
# Prometheus 3.x is published to the module proxy as v0.3xx.y (v0.316.0 is Prometheus 3.16.0).
# Takes several minutes on 2 cores the first time; instant afterwards.
set -euo pipefail
version=v0.316.0
dir="${PROMTOOL_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/video-api/promtool-$version}"
if [ -x "$dir/promtool" ]; then echo "$dir/promtool"; exit 0; fi
command -v go >/dev/null || { echo "install-promtool: Go is needed to build promtool (the rules test is skipped without it)" >&2; exit 1; }
mkdir -p "$dir"
echo "install-promtool: building promtool $version into $dir (one time, several minutes)..." >&2
GOBIN="$dir" GOFLAGS=-buildvcs=false CGO_ENABLED=0 go install "github.com/prometheus/prometheus/cmd/promtool@$version" >&2
"$dir/promtool" --version >&2
echo "$dir/promtool"
