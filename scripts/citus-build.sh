#!/usr/bin/env bash
# Build Citus for the Citus tests (`npm run test:citus`, docs/scale-out.md, issue 35) from the
# source tarball named by KSLATE_CITUS_SRC, into a COPY of Debian's PostgreSQL 15 (never into
# /usr/lib/postgresql), cached between runs under a key made of the tarball's and the patch's
# SHA-256 and the PostgreSQL version.
#
#   KSLATE_CITUS_SRC    the tarball (citus-13.2.2.tar.gz); a relative path is taken from the
#                       repository's parent directory (CI passes ../shared/vendor/citus/...),
#                       then from the current directory. Next to it: SHA256SUMS (both files
#                       are checked) and citus-<version>-pg15.20.patch (applied when present).
#   KSLATE_CITUS_CACHE  the cache root; default ${XDG_CACHE_HOME:-$HOME/.cache}/kslate/citus.
#
# Prints, as its last line of stdout, the root of the installation: <root>/usr/lib/postgresql/15/bin
# holds postgres, initdb and pg_ctl, which find citus.so and citus.control in the same copy
# (PostgreSQL locates its lib and share directories relative to its binaries).
# Build dependencies (Debian): postgresql-15 postgresql-server-dev-15 liblz4-dev libzstd-dev
# libkrb5-dev build-essential; installed with apt-get when missing and running as root.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
src=${KSLATE_CITUS_SRC:-}
if [ -z "$src" ]; then
  echo "citus-build: set KSLATE_CITUS_SRC to the Citus source tarball (e.g. ../shared/vendor/citus/citus-13.2.2.tar.gz)" >&2
  exit 2
fi
if [[ "$src" != /* ]]; then
  if [ -f "$repo/../$src" ]; then src="$repo/../$src"; elif [ -f "$src" ]; then src="$PWD/$src"; fi
fi
if [ ! -f "$src" ]; then
  echo "citus-build: no tarball at $src (KSLATE_CITUS_SRC=$KSLATE_CITUS_SRC)" >&2
  exit 2
fi
srcdir=$(cd "$(dirname "$src")" && pwd)
tarball=$(basename "$src")
version=${tarball#citus-}
version=${version%.tar.gz}

# Integrity: SHA256SUMS must list the tarball, and every file it lists that is here must match.
if [ ! -f "$srcdir/SHA256SUMS" ]; then
  echo "citus-build: no SHA256SUMS next to $tarball" >&2
  exit 1
fi
if ! grep -qE "[[:space:]]\*?$tarball\$" "$srcdir/SHA256SUMS"; then
  echo "citus-build: SHA256SUMS does not list $tarball" >&2
  exit 1
fi
(cd "$srcdir" && sha256sum --quiet --strict -c SHA256SUMS) >&2 || {
  echo "citus-build: SHA-256 mismatch in $srcdir" >&2
  exit 1
}
patch_file=""
for p in "$srcdir"/citus-"$version"-*.patch; do
  [ -f "$p" ] || continue
  if ! grep -qE "[[:space:]]\*?$(basename "$p")\$" "$srcdir/SHA256SUMS"; then
    echo "citus-build: SHA256SUMS does not list $(basename "$p")" >&2
    exit 1
  fi
  patch_file=$p
done

pg_root=/usr/lib/postgresql/15
pg_share=/usr/share/postgresql/15
if [ ! -x "$pg_root/bin/postgres" ]; then
  echo "citus-build: no PostgreSQL 15 at $pg_root (apt-get install postgresql-15)" >&2
  exit 1
fi
# "postgres (PostgreSQL) 15.20 (Debian 15.20-0+deb12u1)": the third word.
pg_version=$("$pg_root/bin/postgres" --version | awk '{print $3}')

key=$( { sha256sum "$src" | cut -d' ' -f1; [ -n "$patch_file" ] && sha256sum "$patch_file" | cut -d' ' -f1; echo "$pg_version"; } | sha256sum | cut -c1-16)
cache=${KSLATE_CITUS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kslate/citus}
root="$cache/$version-pg$pg_version-$key"
if [ -f "$root/.complete" ]; then
  echo "$root"
  exit 0
fi

# Build dependencies, when missing and we may install them.
need=()
for p in postgresql-server-dev-15 liblz4-dev libzstd-dev libkrb5-dev build-essential; do
  dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if ((${#need[@]})); then
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "citus-build: missing ${need[*]}: install them (as root) first" >&2
    exit 1
  fi
  echo "citus-build: installing ${need[*]}" >&2
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >&2
fi

mkdir -p "$cache"
# One build at a time per cache; a second caller waits, then finds it complete.
exec 9>"$cache/.lock"
flock 9
if [ -f "$root/.complete" ]; then
  echo "$root"
  exit 0
fi

work=$(mktemp -d "$cache/.build-XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "citus-build: building Citus $version for PostgreSQL $pg_version in $work (a few minutes)" >&2
mkdir -p "$work/src"
tar -xzf "$src" -C "$work/src" --strip-components=1
if [ -n "$patch_file" ]; then
  (cd "$work/src" && patch -s -p1 < "$patch_file") >&2
fi
# The copy of PostgreSQL: the same layout under $work/root, so the binaries find the copy's lib
# and share directories (their paths are resolved relative to the binary's own location).
inst="$work/root"
mkdir -p "$inst$pg_root" "$inst$pg_share"
cp -a "$pg_root/." "$inst$pg_root/"
cp -a "$pg_share/." "$inst$pg_share/"
jobs=$(nproc 2>/dev/null || echo 2)
(
  cd "$work/src"
  ./configure --without-libcurl PG_CONFIG="$pg_root/bin/pg_config" >"$work/configure.log" 2>&1 || { tail -50 "$work/configure.log"; exit 1; }
  make -j"$jobs" with_llvm=no >"$work/make.log" 2>&1 || { tail -50 "$work/make.log"; exit 1; }
  make install with_llvm=no DESTDIR="$inst" >"$work/install.log" 2>&1 || { tail -50 "$work/install.log"; exit 1; }
) >&2
[ -f "$inst$pg_root/lib/citus.so" ] && [ -f "$inst$pg_share/extension/citus.control" ] || {
  echo "citus-build: the build did not install citus.so and citus.control" >&2
  exit 1
}
# Readable and executable by everyone: the nodes run as the postgres user.
chmod -R a+rX "$inst"
rm -rf "$root"
mv "$inst" "$root"
touch "$root/.complete"
echo "citus-build: installed in $root" >&2
echo "$root"
