#!/usr/bin/env bash
# make images: the manager image, built here with no Docker daemon.
#
#   1. a base image from Debian's packages: debootstrap (minbase + python3) into a
#      directory, trimmed, the non-root user 65532 added, committed by buildah
#      (built once, then reused from the project's own container storage);
#   2. the wheels of this project and its pinned dependencies, built by pip on the host;
#   3. images/manager/Containerfile built by buildah (chroot isolation, vfs storage:
#      no daemon, no overlay mounts, no user namespaces needed);
#   4. a smoke check: the image runs `ptah-manager --help` and the runner as uid 65532;
#   5. the image written as an OCI archive, its digest beside it.
#
# Everything lives under build/ (storage, archives); `make clean-images` removes it.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-"$ROOT/.venv/bin/python"}
SUITE=bookworm
OUT="$ROOT/build/images"
STORE="$ROOT/build/containers"
BASE="localhost/ptah-base:$SUITE"
IMAGE="localhost/ptah-operator:dev"

bah() {
    buildah --root "$STORE/root" --runroot "$STORE/run" --storage-driver vfs "$@"
}

# The Debian mirror this machine's apt already uses (deb822 or one-line sources).
mirror() {
    local found
    found=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
    if [ -z "$found" ]; then
        found=$(awk '$1 == "deb" {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
    fi
    [ -n "$found" ] || { echo "images: no Debian mirror configured for apt" >&2; exit 1; }
    echo "$found"
}

stamp() { printf '# %s %s\n' "$(date -u +%H:%M:%S)" "$*"; }

mkdir -p "$OUT" "$STORE"
started=$(date +%s)

if bah inspect --type image "$BASE" >/dev/null 2>&1; then
    stamp "base $BASE: cached"
else
    stamp "base $BASE: debootstrap $SUITE (minbase + python3)"
    rootfs=$(mktemp -d /var/tmp/ptah-base-XXXXXX)
    trap 'rm -rf "$rootfs"' EXIT
    debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
        "$SUITE" "$rootfs" "$(mirror)" >"$OUT/debootstrap.log" 2>&1 \
        || { tail -20 "$OUT/debootstrap.log" >&2; exit 1; }
    # What a running manager never reads: package indexes, caches, documentation.
    rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/* "$rootfs"/var/log/* \
        "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* \
        "$rootfs"/usr/share/locale/*
    echo "ptah:x:65532:65532:ptah-operator:/nonexistent:/usr/sbin/nologin" >>"$rootfs/etc/passwd"
    echo "ptah:x:65532:" >>"$rootfs/etc/group"
    ctr=$(bah from scratch)
    mnt=$(bah mount "$ctr")
    tar -C "$rootfs" --exclude='./dev/*' --exclude='./proc/*' --exclude='./sys/*' -cf - . \
        | tar -C "$mnt" -xf -
    bah umount "$ctr" >/dev/null
    bah config --env PATH=/usr/bin:/bin --user 65532:65532 --workingdir / "$ctr"
    bah commit --quiet --rm "$ctr" "$BASE" >/dev/null
    rm -rf "$rootfs"
    trap - EXIT
fi

stamp "wheels: this project and its pinned dependencies"
context="$OUT/context"
rm -rf "$context"
mkdir -p "$context/wheels"
# setuptools reuses build/lib between builds: a module deleted or moved since the last
# wheel would otherwise still be packed into this one.
rm -rf "$ROOT/build/lib" "$ROOT"/build/bdist.*
"$PYTHON" -m pip wheel --quiet --disable-pip-version-check --wheel-dir "$context/wheels" "$ROOT"

stamp "image $IMAGE from images/manager/Containerfile"
bah bud --quiet --isolation chroot --build-arg "BASE=$BASE" \
    -f "$ROOT/images/manager/Containerfile" -t "$IMAGE" "$context" >/dev/null

stamp "smoke: ptah-manager --help and the runner, as uid 65532"
ctr=$(bah from "$IMAGE")
trap 'bah rm "$ctr" >/dev/null 2>&1 || true' EXIT
bah run --isolation chroot "$ctr" -- ptah-manager --help | head -1
uid=$(bah run --isolation chroot "$ctr" -- python -c 'import os; print(os.getuid())')
[ "$uid" = 65532 ] || { echo "images: the image runs as uid $uid, not 65532" >&2; exit 1; }
# With no Job environment the runner refuses with its own sentence (and exit 2), which
# proves it starts; buildah's lines about the non-zero exit are dropped.
runner=$(bah run --isolation chroot "$ctr" -- python -m runner 2>&1 \
    | grep '^ptah-runner: ' || true)
case "$runner" in
    "ptah-runner: no result frame can be written"*) ;;
    *) echo "images: the runner did not start" >&2; exit 1 ;;
esac
echo "runner as uid $uid, no Job environment: $runner"
bah rm "$ctr" >/dev/null
trap - EXIT

stamp "export: OCI archive and digest"
rm -f "$OUT/ptah-operator.oci.tar"
bah push --quiet --digestfile "$OUT/ptah-operator.digest" "$IMAGE" \
    "oci-archive:$OUT/ptah-operator.oci.tar:ptah-operator:dev"
size=$(du -h "$OUT/ptah-operator.oci.tar" | cut -f1)
stamp "ptah-operator $(cat "$OUT/ptah-operator.digest") ($size) in $(( $(date +%s) - started ))s"
