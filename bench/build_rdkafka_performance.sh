#!/usr/bin/env bash
# Build librdkafka's own benchmark client, examples/rdkafka_performance, for bench/node_bench.py.
#
#   bench/build_rdkafka_performance.sh [OUT_DIR]      # default .cache/rdkafka-perf (make rdkafka-perf)
#
# The source is Debian bookworm's librdkafka source package (`apt-get source librdkafka`), the
# same release as the system's librdkafka1 that kcat uses, and the program is linked against that
# system library (librdkafka-dev): both C clients of the benchmark then run the same librdkafka.
# rdkafka_performance.c includes two private headers of the source tree (src/rd.h, src/rdtime.h,
# inline helpers only), which need the tree's config.h: so the tree is configured (a few seconds),
# but not built. Nothing is installed outside OUT_DIR except Debian packages:
#   - a deb-src stanza for bookworm in /etc/apt/sources.list.d/debian-bookworm-src.sources
#     (if no deb-src line for librdkafka is configured yet), then `apt-get update`;
#   - dpkg-dev (apt-get source), gcc, make, pkg-config and librdkafka-dev.
# Needs root on Debian for those; as another user with them present it only builds.
#
# OUT_DIR then holds: rdkafka_performance (the binary), VERSION (the source package version and
# the librdkafka version the binary reports at run time) and src/ (the unpacked source).
set -euo pipefail

out=${1:-"$(cd "$(dirname "$0")/.." && pwd)/.cache/rdkafka-perf"}
mkdir -p "$out"
out=$(cd "$out" && pwd)

need_packages=()
for pkg in dpkg-dev gcc make pkg-config librdkafka-dev; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || need_packages+=("$pkg")
done
have_source() { apt-cache showsrc librdkafka 2>/dev/null | grep -q '^Package: librdkafka'; }

if [ "${#need_packages[@]}" -gt 0 ] || ! have_source; then
  if [ "$(id -u)" != 0 ] || [ ! -f /etc/debian_version ]; then
    echo "error: need Debian packages ${need_packages[*]:-} and a deb-src entry for librdkafka;" \
      "run this script as root on Debian, or install them and add deb-src yourself" >&2
    exit 1
  fi
  if ! have_source; then
    codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
    echo "adding a deb-src stanza for Debian $codename" >&2
    cat >/etc/apt/sources.list.d/debian-"$codename"-src.sources <<EOF
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: $codename
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  fi
  apt-get update -q
  if [ "${#need_packages[@]}" -gt 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need_packages[@]}"
  fi
fi

system_version=$(pkg-config --modversion rdkafka)
source_version=$(apt-cache showsrc librdkafka | sed -n 's/^Version: //p' | head -n 1)
upstream=${source_version%-*}
upstream=${upstream#*:}
if [ "$upstream" != "$system_version" ]; then
  echo "error: the source package is librdkafka $source_version but the system library (librdkafka-dev)" \
    "is $system_version; upgrade one of them so that they match" >&2
  exit 1
fi

tree="$out/src/librdkafka-$upstream"
if [ ! -f "$tree/examples/rdkafka_performance.c" ]; then
  rm -rf "$out/src"
  mkdir -p "$out/src"
  (cd "$out/src" && apt-get source -q librdkafka="$source_version")
fi
if [ ! -f "$tree/config.h" ]; then
  (cd "$tree" && ./configure >"$out/configure.log" 2>&1) || {
    echo "error: ./configure of $tree failed; see $out/configure.log" >&2
    exit 1
  }
fi

# shellcheck disable=SC2046  # pkg-config's flags are meant to be split
cc -O2 -Wall -I"$tree/src" "$tree/examples/rdkafka_performance.c" -o "$out/rdkafka_performance.new" \
  $(pkg-config --cflags --libs rdkafka) -lm -lpthread
mv "$out/rdkafka_performance.new" "$out/rdkafka_performance"

# The binary's usage text names the librdkafka it runs with ("librdkafka version 2.0.2 (0x020002ff)").
runtime=$("$out/rdkafka_performance" -h 2>&1 | sed -n 's/^librdkafka version \([^ ]*\).*/\1/p' | head -n 1 || true)
{
  echo "source_package=librdkafka $source_version (Debian, apt-get source)"
  echo "linked_librdkafka=$system_version (librdkafka-dev)"
  echo "runtime_librdkafka=${runtime:-unknown}"
} >"$out/VERSION"
echo "built $out/rdkafka_performance (librdkafka ${runtime:-unknown}, source $source_version)"
