#!/bin/sh
# etcd for the bench's peer rows (issue 38 item 5): Debian's etcd-server, installed with
# apt-get when missing. Idempotent: with etcd on the PATH it only prints where it is.
# Prints the etcd binary's path and exits 0; otherwise prints why not on stderr and exits 1
# (the bench then reports the etcd rows as not available, with that reason).
set -u
if command -v etcd >/dev/null 2>&1; then
  command -v etcd
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "etcd is not installed and apt-get is not available to install etcd-server" >&2
  exit 1
fi
if [ "$(id -u)" = 0 ]; then
  AS_ROOT=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  AS_ROOT="sudo -n"
else
  echo "etcd is not installed and installing etcd-server needs root (not root, no password-less sudo)" >&2
  exit 1
fi
# The package's maintainer scripts may try to start a system service; the bench starts its
# own etcd on free loopback ports in a temp dir, so a running system one does not matter.
export DEBIAN_FRONTEND=noninteractive
if ! $AS_ROOT apt-get install -y --no-install-recommends etcd-server >/dev/null 2>&1; then
  # The package lists may be missing or stale (a fresh container): refresh once and retry.
  if ! { $AS_ROOT apt-get update >/dev/null 2>&1 && $AS_ROOT apt-get install -y --no-install-recommends etcd-server >/dev/null 2>&1; }; then
    echo "apt-get install etcd-server failed" >&2
    exit 1
  fi
fi
if command -v etcd >/dev/null 2>&1; then
  command -v etcd
  exit 0
fi
echo "etcd-server was installed but no etcd binary is on the PATH" >&2
exit 1
