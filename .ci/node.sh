#!/usr/bin/env bash
# Installs the Node.js binary of one exact version from the npm registry (the node-linux-<arch>
# package, which holds bin/node and the headers node-gyp builds native addons against) into a
# cache outside the repository, and prints that directory on stdout.
#   bash .ci/node.sh 22.23.5      -> /root/.cache/statefold-node/22.23.5
# Environment: STATEFOLD_NODE_CACHE (default ~/.cache/statefold-node).
set -Eeuo pipefail
version=${1:?usage: node.sh <exact version>}
case "$(uname -m)" in
  x86_64) arch=x64 ;;
  aarch64 | arm64) arch=arm64 ;;
  *) echo "node.sh: no node-linux package for $(uname -m)" >&2; exit 1 ;;
esac
cache=${STATEFOLD_NODE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/statefold-node}
dir=$cache/$version
if [[ ! -x $dir/bin/node ]]; then
  work=$(mktemp -d "$cache.XXXXXX" 2>/dev/null || { mkdir -p "$(dirname "$cache")" && mktemp -d "$cache.XXXXXX"; })
  trap 'rm -rf "$work"' EXIT
  (cd "$work" && timeout 300 npm pack "node-linux-$arch@$version" --silent >/dev/null && tar xzf "node-linux-$arch-$version.tgz")
  mkdir -p "$cache"
  rm -rf "$dir"
  mv "$work/package" "$dir"
fi
[[ "$("$dir/bin/node" --version)" == "v$version" ]] || { echo "node.sh: $dir/bin/node is not v$version" >&2; exit 1; }
echo "$dir"
