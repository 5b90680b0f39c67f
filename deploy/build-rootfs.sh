#!/usr/bin/env bash
# The base image of ALE Robotics' containers, made without a registry: a minimal Debian
# bookworm root file system (debootstrap --variant=minbase, from the Debian mirror apt
# uses here) with Python 3.11 and its venv module, imported into Docker as IMAGE.
#
#   deploy/build-rootfs.sh [IMAGE]        # default ale-robotics/base:bookworm
#
# Needs root, debootstrap and a running Docker daemon. Idempotent: does nothing when
# IMAGE exists (ALE_REBUILD_BASE=1 forces a rebuild). The tarball is cached in
# ALE_IMAGES_CACHE (default ~/.cache/ale-robotics/images), so a rebuild after
# 'docker image rm' takes seconds.
set -euo pipefail
IMAGE=${1:-ale-robotics/base:bookworm}
CACHE=${ALE_IMAGES_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ale-robotics/images}
TARBALL=$CACHE/rootfs-bookworm.tar
PACKAGES=python3,python3-venv,ca-certificates

if [ "${ALE_REBUILD_BASE:-0}" != 1 ] && docker image inspect "$IMAGE" >/dev/null 2>&1; then
    echo "base image $IMAGE exists"
    exit 0
fi
if [ "${ALE_REBUILD_BASE:-0}" = 1 ] || [ ! -s "$TARBALL" ]; then
    [ "$(id -u)" = 0 ] || { echo "debootstrap needs root" >&2; exit 1; }
    command -v debootstrap >/dev/null || { echo "debootstrap missing: apt-get install debootstrap" >&2; exit 1; }
    # The mirror apt uses on this host (deb822 .sources or a one-line sources.list entry),
    # unless DEBIAN_MIRROR says otherwise.
    MIRROR=${DEBIAN_MIRROR:-}
    if [ -z "$MIRROR" ]; then
        MIRROR=$(grep -hsE '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}' \
            | grep -v security | head -n1 || true)
    fi
    if [ -z "$MIRROR" ]; then
        MIRROR=$(grep -hsE '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
            | awk '{print $2}' | grep -v security | head -n1 || true)
    fi
    MIRROR=${MIRROR:-http://deb.debian.org/debian}
    mkdir -p "$CACHE"
    ROOT=$(mktemp -d "$CACHE/rootfs.XXXXXX")
    trap 'rm -rf "$ROOT"' EXIT
    echo "debootstrap bookworm from $MIRROR ..."
    debootstrap --variant=minbase --include="$PACKAGES" bookworm "$ROOT" "$MIRROR"
    # Smaller and reproducible enough: no apt lists, caches or docs.
    rm -rf "$ROOT"/var/lib/apt/lists/* "$ROOT"/var/cache/apt/*.bin "$ROOT"/var/cache/apt/archives/*.deb \
        "$ROOT"/usr/share/doc/* "$ROOT"/usr/share/man/* "$ROOT"/usr/share/locale/* "$ROOT"/tmp/*
    tar -C "$ROOT" --numeric-owner -cf "$TARBALL.tmp" .
    mv "$TARBALL.tmp" "$TARBALL"
fi
docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["/bin/bash"]' \
    "$TARBALL" "$IMAGE"
echo "base image $IMAGE imported"
