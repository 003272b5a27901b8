#!/usr/bin/env bash
# Prints the path of a Python >=3.12,<3.14 (upstream tau2-bench v1 needs one).
# Looks on PATH and in ~/.pyenv first; if none is there, builds CPython 3.13.5 from
# Debian's source package once, into a cache outside the clone, and reuses it after.
#
# stdout: the interpreter's path, nothing else. Progress goes to stderr.
# Environment:
#   PYTHON313_BUILD=1    skip the search and use (or build) the cached CPython
#   PYTHON313_PREFIX     where to build it (default ${XDG_CACHE_HOME:-~/.cache}/tau2-a2a/python3.13)
#   PYTHON313_MIRROR     Debian mirror (default http://deb.debian.org/debian)
set -euo pipefail

VERSION=3.13.5
SHA256=93e583f243454e6e9e4588ca2c2662206ad961659863277afcdb96801647d640
MIRROR=${PYTHON313_MIRROR:-http://deb.debian.org/debian}
URL="$MIRROR/pool/main/p/python3.13/python3.13_${VERSION}.orig.tar.xz"
PREFIX=${PYTHON313_PREFIX:-${XDG_CACHE_HOME:-$HOME/.cache}/tau2-a2a/python3.13}
# Debian 12 package names of what CPython's extension modules link against.
BUILD_DEPS=(build-essential libssl-dev zlib1g-dev libbz2-dev libreadline-dev libsqlite3-dev
            libffi-dev liblzma-dev libgdbm-dev uuid-dev xz-utils)

say() { echo "python313: $*" >&2; }
die() { echo "python313: error: $*" >&2; exit 1; }

# True if $1 is a Python 3.12 or 3.13 with the modules a virtualenv and pip need.
usable() {
    [ -x "$1" ] && "$1" -c 'import sys
assert (3, 12) <= sys.version_info[:2] < (3, 14)
import venv, ensurepip, ssl, sqlite3, ctypes, zlib, bz2, lzma' >/dev/null 2>&1
}

find_existing() {
    local candidate
    for candidate in "$(command -v python3.13 || true)" "$(command -v python3.12 || true)" \
                     "$HOME"/.pyenv/versions/3.13*/bin/python3.13 \
                     "$HOME"/.pyenv/versions/3.12*/bin/python3.12; do
        if [ -n "$candidate" ] && usable "$candidate"; then
            echo "$candidate"
            return 0
        fi
    done
    return 1
}

install_build_deps() {
    local missing=() pkg sudo=""
    for pkg in "${BUILD_DEPS[@]}"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    command -v apt-get >/dev/null || die "missing build packages ${missing[*]} and no apt-get: install them, or put a Python 3.12/3.13 on PATH"
    [ "$(id -u)" = 0 ] || sudo=sudo
    say "installing build packages with apt: ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1 \
        || { $sudo apt-get update -qq >&2 \
             && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; } \
        || die "apt-get could not install ${missing[*]}"
}

download() {
    local dest=$1
    say "downloading $URL"
    if command -v curl >/dev/null; then
        curl -fsL --retry 3 -o "$dest" "$URL" || die "download failed: $URL (set PYTHON313_MIRROR to another Debian mirror)"
    else
        wget -q -O "$dest" "$URL" || die "download failed: $URL (set PYTHON313_MIRROR to another Debian mirror)"
    fi
    echo "$SHA256  $dest" | sha256sum -c --status \
        || die "sha256 of $URL is not $SHA256: refusing to build it"
    say "sha256 ok ($SHA256)"
}

build() {
    local jobs
    work=$(mktemp -d "${TMPDIR:-/tmp}/python313-build.XXXXXX")
    trap 'rm -rf "$work"' EXIT
    jobs=$(nproc 2>/dev/null || echo 2)
    install_build_deps
    download "$work/python.tar.xz"
    tar -xJf "$work/python.tar.xz" -C "$work"
    local src
    src=$(find "$work" -mindepth 1 -maxdepth 1 -type d -name 'Python-*' | head -n 1)
    [ -n "$src" ] || die "no Python-* directory in $URL"
    rm -rf "$PREFIX"
    mkdir -p "$PREFIX"
    say "building CPython $VERSION into $PREFIX (make -j$jobs; about 5-10 minutes on 2 cores; log: $PREFIX.build.log)"
    local started=$SECONDS
    ( cd "$src" && ./configure --prefix="$PREFIX" && make -j"$jobs" && make install ) >"$PREFIX.build.log" 2>&1 \
        || { rm -rf "$PREFIX"; die "the CPython build failed; see the end of $PREFIX.build.log"; }
    usable "$PREFIX/bin/python3.13" \
        || { rm -rf "$PREFIX"; die "the built CPython lacks a module pip needs (ssl, sqlite3, ctypes, ...); see $PREFIX.build.log"; }
    touch "$PREFIX/.complete"
    say "built CPython $VERSION in $((SECONDS - started)) s"
}

main() {
    if [ "${PYTHON313_BUILD:-0}" != 1 ] && find_existing; then
        return 0
    fi
    local python="$PREFIX/bin/python3.13"
    if [ -f "$PREFIX/.complete" ] && usable "$python"; then
        echo "$python"
        return 0
    fi
    mkdir -p "$(dirname "$PREFIX")"
    # One build at a time per cache: a second caller waits, then finds the result.
    exec 9>"$PREFIX.lock"
    flock 9
    if ! { [ -f "$PREFIX/.complete" ] && usable "$python"; }; then
        if [ "${PYTHON313_BUILD:-0}" = 1 ]; then
            say "PYTHON313_BUILD=1: building CPython $VERSION instead of searching PATH and ~/.pyenv"
        else
            say "no Python 3.12 or 3.13 found (PATH, ~/.pyenv); building CPython $VERSION"
        fi
        build
    fi
    echo "$python"
}

main "$@"
