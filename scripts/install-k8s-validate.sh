#!/usr/bin/env bash
# Builds deploy/validate (the strict check of rendered Kubernetes objects against k8s.io/api's types)
# once per version of its sources, into a cache outside the repo, and prints its path. Its modules
# come from the Go module proxy the first time (several minutes on 2 cores); instant afterwards.
set -euo pipefail
cd "$(dirname "$0")/../deploy/validate"
hash="$(cat go.mod go.sum ./*.go | sha256sum | cut -c1-16)"
dir="${K8S_VALIDATE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/video-api/k8s-validate-$hash}"
if [ -x "$dir/validate" ]; then echo "$dir/validate"; exit 0; fi
command -v go >/dev/null || { echo "install-k8s-validate: Go is needed to build deploy/validate (the chart test is skipped without it)" >&2; exit 1; }
mkdir -p "$dir"
echo "install-k8s-validate: building deploy/validate into $dir (once per change of its sources)..." >&2
GOFLAGS=-buildvcs=false CGO_ENABLED=0 go build -o "$dir/validate.tmp" . >&2
mv "$dir/validate.tmp" "$dir/validate"
echo "$dir/validate"
