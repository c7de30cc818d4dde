#!/usr/bin/env bash
# What `npm run test:ha` needs (docs/ha.md, test/ha/cluster.ts): Debian's patroni (3.0.x),
# etcd-server (3.4), haproxy (2.6) and postgresql-15. Installs only what is missing, with
# apt-get (as root, or through sudo); does nothing when everything is there.
set -euo pipefail

need=()
command -v patroni >/dev/null 2>&1 || need+=(patroni)
command -v etcd >/dev/null 2>&1 || need+=(etcd-server)
command -v haproxy >/dev/null 2>&1 || need+=(haproxy)
[ -x /usr/lib/postgresql/15/bin/postgres ] || need+=(postgresql-15)
# Patroni 3.0.x's etcd support needs python3-etcd (an alternative dependency apt may not pick).
/usr/bin/python3 -c 'import etcd' >/dev/null 2>&1 || need+=(python3-etcd)

if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi

sudo=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    sudo=(sudo)
  else
    echo "ha-deps: missing ${need[*]}; run this script as root (apt-get install needs it)" >&2
    exit 1
  fi
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "ha-deps: missing ${need[*]} and no apt-get: install them with your package manager" >&2
  exit 1
fi

echo "ha-deps: installing ${need[*]}"
# The packages must not start their services (CI needs none of them running; the tests start
# their own on free ports): a policy-rc.d refusing every start, for the install only, unless
# the machine has one already.
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee "$policy" >/dev/null
  "${sudo[@]}" chmod +x "$policy"
  trap '"${sudo[@]}" rm -f "$policy"' EXIT
fi
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"
