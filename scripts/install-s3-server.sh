#!/usr/bin/env bash
# Installs an S3-compatible server (MinIO) once, from the Go module proxy, into a cache outside the
# repo, and prints its path. test/platform/s3-storage.test.ts runs it on loopback (S3_SERVER_CMD).
# Takes ~8 minutes on 2 cores the first time; instant afterwards.
# MinIO's RELEASE.* tags are not semver and the module proxy serves only its pseudo-versions, so the
# version is pinned as one: the newest commit (2026-02-12) of github.com/minio/minio, no replace directives.
set -euo pipefail
version=v0.0.0-20260212201848-7aac2a2c5b7c
dir="${S3_SERVER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/video-api/minio-$version}"
if [ -x "$dir/minio" ]; then echo "$dir/minio"; exit 0; fi
command -v go >/dev/null || { echo "install-s3-server: Go is needed to build MinIO (the S3 storage test is skipped without it)" >&2; exit 1; }
mkdir -p "$dir"
echo "install-s3-server: building minio $version into $dir (one time, several minutes)..." >&2
GOBIN="$dir" GOFLAGS=-buildvcs=false CGO_ENABLED=0 go install "github.com/minio/minio@$version" >&2
"$dir/minio" --version >&2
echo "$dir/minio"
