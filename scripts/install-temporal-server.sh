#!/usr/bin/env bash
# Installs the production Temporal server once, from the Go module proxy, into a cache outside the repo:
# temporal-server (go.temporal.io/server/cmd/server) and temporal-sql-tool (.../cmd/tools/sql), with the
# server's SQL schema files beside them (temporal-sql-tool applies them). Prints the cache directory.
# Takes a few minutes on 2 cores the first time; instant afterwards.
set -euo pipefail
version=v1.29.1
dir="${TEMPORAL_SERVER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/video-api/temporal-server-$version}"
if [ -x "$dir/temporal-server" ] && [ -x "$dir/temporal-sql-tool" ] && [ -d "$dir/schema/postgresql" ]; then
  echo "$dir"; exit 0
fi
command -v go >/dev/null || { echo "install-temporal-server: Go is needed to build temporal-server" >&2; exit 1; }
mkdir -p "$dir/bin.tmp"
echo "install-temporal-server: building temporal-server $version into $dir (one time, several minutes)..." >&2
GOBIN="$dir/bin.tmp" GOFLAGS=-buildvcs=false CGO_ENABLED=0 \
  go install "go.temporal.io/server/cmd/server@$version" "go.temporal.io/server/cmd/tools/sql@$version" >&2
mv "$dir/bin.tmp/server" "$dir/temporal-server"
mv "$dir/bin.tmp/sql" "$dir/temporal-sql-tool"
rmdir "$dir/bin.tmp"
# The schema files ship in the module's source, which `go install` left in the module cache.
src="$(GOFLAGS=-mod=mod go env GOMODCACHE)/go.temporal.io/server@$version"
rm -rf "$dir/schema" && cp -r "$src/schema" "$dir/schema" && chmod -R u+w "$dir/schema"
"$dir/temporal-server" --version >&2 || true
echo "$dir"
