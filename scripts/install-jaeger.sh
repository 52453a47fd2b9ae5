#!/usr/bin/env bash
# Installs Jaeger (its all-in-one `jaeger` binary: an OTLP receiver, in-memory storage and the query
# API) once, from the Go module proxy, into a cache outside the repo, and prints its path.
# test/platform/tracing.test.ts sends the service's traces to it and reads a job's trace back through the query
# API. Jaeger's go.mod has a replace directive, so `go install pkg@version` refuses it: the module is
# downloaded and built as the main module instead. Takes many minutes on 2 cores the first time.
set -euo pipefail
version=v1.76.0
dir="${JAEGER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/video-api/jaeger-$version}"
if [ -x "$dir/jaeger" ]; then echo "$dir/jaeger"; exit 0; fi
command -v go >/dev/null || { echo "install-jaeger: Go is needed to build Jaeger (the tracing test is skipped without it)" >&2; exit 1; }
mkdir -p "$dir"
echo "install-jaeger: building jaeger $version into $dir (one time, many minutes)..." >&2
src="$(cd /tmp && GOFLAGS=-mod=mod go mod download -json "github.com/jaegertracing/jaeger@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
[ -d "$src" ] || { echo "install-jaeger: could not download github.com/jaegertracing/jaeger@$version" >&2; exit 1; }
work="$(mktemp -d)"
trap 'chmod -R u+w "$work"; rm -rf "$work"' EXIT
cp -r "$src/." "$work/"
chmod -R u+w "$work"
(cd "$work" && GOFLAGS=-buildvcs=false CGO_ENABLED=0 go build -o "$dir/jaeger.tmp" ./cmd/jaeger) >&2
mv "$dir/jaeger.tmp" "$dir/jaeger"
echo "$dir/jaeger"
