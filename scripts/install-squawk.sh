#!/usr/bin/env bash
# Installs squawk (a linter of PostgreSQL migrations) once, from PyPI's squawk-cli (a wheel carrying the
# binary), into a cache outside the repo, and prints the binary's path. test/platform/migrations-lint.test.ts
# runs it on every migration added after the released ones (.squawk.toml lists those it skips).
set -euo pipefail
version=2.70.0
dir="${SQUAWK_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/video-api/squawk-$version}"
if [ -x "$dir/bin/squawk" ]; then echo "$dir/bin/squawk"; exit 0; fi
command -v python3 >/dev/null || { echo "install-squawk: python3 is needed to install squawk-cli (the migration lint is skipped without it)" >&2; exit 1; }
echo "install-squawk: installing squawk-cli $version into $dir (one time)..." >&2
python3 -m pip install --quiet --disable-pip-version-check --no-deps --target "$dir/lib" "squawk-cli==$version" >&2
# The wheel puts its binary in the data scripts folder: find it wherever pip placed it.
found="$(find "$dir/lib" -type f -name squawk -perm -u+x | head -n 1)"
[ -n "$found" ] || { echo "install-squawk: the squawk-cli wheel carried no squawk binary" >&2; exit 1; }
mkdir -p "$dir/bin"
ln -sf "$found" "$dir/bin/squawk"
"$dir/bin/squawk" --version >&2
echo "$dir/bin/squawk"
