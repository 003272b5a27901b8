#!/usr/bin/env bash
# A local base image for `make image` where no image registry can be reached: Debian trixie (Python 3.13)
# made from Debian's packages with debootstrap, then `docker import`ed. Needs root, debootstrap and a
# Docker daemon. Usage: scripts/base-image.sh [NAME] (default tau2-a2a-base:trixie). Does nothing when
# the image exists already.
set -euo pipefail

name="${1:-tau2-a2a-base:trixie}"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"

if docker image inspect "$name" >/dev/null 2>&1; then
  echo "$name exists"
  exit 0
fi
command -v debootstrap >/dev/null || { echo "debootstrap is missing: apt-get install -y debootstrap"; exit 1; }
[ "$(id -u)" = 0 ] || { echo "debootstrap needs root: run this script as root"; exit 1; }

root="$(mktemp -d)"
trap 'rm -rf "$root"' EXIT
echo "Making Debian trixie in $root (debootstrap, a few minutes)"
debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates trixie "$root" "$mirror" >/dev/null
# What the official slim images leave out too: package lists, caches, documentation.
chroot "$root" apt-get clean
rm -rf "$root"/var/lib/apt/lists/* "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/locale/*
python="$(chroot "$root" python3 --version)"
chmod 755 "$root"  # mktemp made it 0700: the image's / must let its non-root users through
tar -C "$root" -c . | docker import --change 'CMD ["/bin/bash"]' --change 'ENV LANG=C.UTF-8' - "$name" >/dev/null
echo "Made $name ($python)"
