#!/usr/bin/env bash
# Installs the Temporal CLI (dev server + Web UI) once, from the Go module proxy, into a cache outside
# the repo, and prints its path. Takes ~10 minutes on 2 cores the first time; instant afterwards.
# v1.5.1 is the last tag installable with `go install` (later tags carry a replace directive).
set -euo pipefail
version=v1.5.1
dir="${TEMPORAL_CLI_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/video-api/temporal-cli-$version}"
if [ -x "$dir/temporal" ]; then echo "$dir/temporal"; exit 0; fi
command -v go >/dev/null || { echo "install-temporal-cli: Go is needed to build the Temporal CLI (or set TEMPORAL_CLI_PATH / TEMPORAL_ADDRESS)" >&2; exit 1; }
mkdir -p "$dir"
echo "install-temporal-cli: building temporal $version into $dir (one time, about 10 minutes)..." >&2
if ! GOBIN="$dir" GOFLAGS=-buildvcs=false go install "github.com/temporalio/cli/cmd/temporal@$version" >&2; then
  echo "install-temporal-cli: retrying with GOTOOLCHAIN=go1.25.5" >&2
  GOTOOLCHAIN=go1.25.5 GOBIN="$dir" GOFLAGS=-buildvcs=false go install "github.com/temporalio/cli/cmd/temporal@$version" >&2
fi
"$dir/temporal" --version >&2
echo "$dir/temporal"
