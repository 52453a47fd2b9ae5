#!/usr/bin/env bash
# Installs helm once, from the Go module proxy, into a cache outside the repo, and prints its path.
# test/platform/helm-chart.test.ts lints and renders deploy/helm/video-voice-api with it (no network needed).
# Takes several minutes on 2 cores the first time; instant afterwards.
set -euo pipefail
version=v3.22.0
dir="${HELM_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/video-api/helm-$version}"
if [ -x "$dir/helm" ]; then echo "$dir/helm"; exit 0; fi
command -v go >/dev/null || { echo "install-helm: Go is needed to build helm (the chart test is skipped without it)" >&2; exit 1; }
mkdir -p "$dir"
echo "install-helm: building helm $version into $dir (one time, several minutes)..." >&2
GOBIN="$dir" GOFLAGS=-buildvcs=false CGO_ENABLED=0 go install "helm.sh/helm/v3/cmd/helm@$version" >&2
"$dir/helm" version --short >&2
echo "$dir/helm"
