#!/usr/bin/env bash
# Installs stripe-mock (Stripe's own mock of its API, answering from Stripe's OpenAPI specification and
# fixtures) once, from the Go module proxy, into a cache outside the repo, and prints its path.
# test/billing/*.test.ts run it as a real process and point the official `stripe` library at it
# (STRIPE_API_BASE). Takes a minute or two on 2 cores the first time; instant afterwards.
set -euo pipefail
version=v0.203.0
dir="${STRIPE_MOCK_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/video-api/stripe-mock-$version}"
if [ -x "$dir/stripe-mock" ]; then echo "$dir/stripe-mock"; exit 0; fi
command -v go >/dev/null || { echo "install-stripe-mock: Go is needed to build stripe-mock (the billing tests are skipped without it)" >&2; exit 1; }
mkdir -p "$dir"
echo "install-stripe-mock: building stripe-mock $version into $dir (one time, a minute or two)..." >&2
GOBIN="$dir" GOFLAGS=-buildvcs=false CGO_ENABLED=0 go install "github.com/stripe/stripe-mock@$version" >&2
echo "$dir/stripe-mock"
