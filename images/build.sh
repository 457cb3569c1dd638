#!/usr/bin/env bash
# make images: the manager image, the lab's manager image (the manager image plus the
# lab layer: lab.manager and its fault hooks), the lab executor image and the two
# scratch database images (PostgreSQL 15, MariaDB 10.11: the database the operator
# provides to a PtahSchema that names none), built here with no Docker daemon.
#
#   1. a base image from Debian's packages: debootstrap (minbase + python3) into a
#      directory, trimmed, the non-root user 65532 added, committed by buildah
#      (built once, then reused from the project's own container storage);
#   2. for each image, a fingerprint of what it is built from (images/inputs.py); an
#      image whose archive is there with the same fingerprint is "cached" and skipped;
#   3. the wheels the images install, built by pip on the host at the versions this
#      checkout's .venv runs (its `pip freeze` as constraints), plus lab/executor;
#   4. images/<image>/Containerfile built by buildah (chroot isolation, vfs storage:
#      no daemon, no overlay mounts, no user namespaces needed); the scratch images
#      install Debian's server packages from the base's own Debian source;
#   5. a smoke check per image, as uid 65532, in an image with no shell left in it
#      (the scratch images keep /bin/sh, which initdb and mariadb-install-db run; their
#      check starts the server on loopback and creates and drops a table as `scratch`);
#   6. each image written as an OCI archive, its digest beside it, and the digest
#      checked by pushing the archive to a throw-away registry on loopback
#      (`crane registry serve`) and reading back the digest the registry kept.
#
# The stable interface (what `make run` and a cluster install consume):
#   build/images/ptah-operator.oci.tar       build/images/ptah-operator.digest
#   build/images/ptah-lab-executor.oci.tar   build/images/ptah-lab-executor.digest
#   build/images/ptah-lab-manager.oci.tar    build/images/ptah-lab-manager.digest
#   build/images/ptah-scratch-postgresql.oci.tar  build/images/ptah-scratch-postgresql.digest
#   build/images/ptah-scratch-mariadb.oci.tar     build/images/ptah-scratch-mariadb.digest
# each digest `sha256:<hex>` of the image manifest a registry push keeps.
# Everything lives under build/ (storage, archives); `make clean-images` removes it.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-"$ROOT/.venv/bin/python"}
CRANE=${CRANE:-"$ROOT/.tools/bin/crane"}
SUITE=bookworm
OUT="$ROOT/build/images"
STORE="$ROOT/build/containers"
BASE="localhost/ptah-base:$SUITE"
# image (its directory under images/) -> the name of its archive and local tag
declare -A ARCHIVE=([manager]=ptah-operator [lab-executor]=ptah-lab-executor [lab-manager]=ptah-lab-manager
    [scratch-postgresql]=ptah-scratch-postgresql [scratch-mariadb]=ptah-scratch-mariadb)
# lab-manager is built FROM the manager image, so after it.
ORDER=(manager lab-executor lab-manager scratch-postgresql scratch-mariadb)

bah() {
    buildah --root "$STORE/root" --runroot "$STORE/run" --storage-driver vfs "$@"
}

# Whatever this script starts or creates is removed on any exit.
CONTAINERS=()
TEMPS=()
REGISTRY_PID=
cleanup() {
    local c
    for c in "${CONTAINERS[@]}"; do bah rm "$c" >/dev/null 2>&1 || true; done
    if [ -n "$REGISTRY_PID" ]; then
        kill "$REGISTRY_PID" 2>/dev/null || true
        wait "$REGISTRY_PID" 2>/dev/null || true
    fi
    [ "${#TEMPS[@]}" -eq 0 ] || rm -rf "${TEMPS[@]}"
}
trap cleanup EXIT

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
fail() { echo "images: $*" >&2; exit 1; }

mkdir -p "$OUT" "$STORE"
started=$(date +%s)

# -- 1. the base ------------------------------------------------------------------------
if bah inspect --type image "$BASE" >/dev/null 2>&1; then
    stamp "base $BASE: cached"
else
    stamp "base $BASE: debootstrap $SUITE (minbase + python3)"
    rootfs=$(mktemp -d /var/tmp/ptah-base-XXXXXX)
    TEMPS+=("$rootfs")
    debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
        "$SUITE" "$rootfs" "$(mirror)" >"$OUT/debootstrap.log" 2>&1 \
        || { tail -20 "$OUT/debootstrap.log" >&2; exit 1; }
    # What a running program never reads: package indexes, caches, documentation.
    rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/* "$rootfs"/var/log/* \
        "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* \
        "$rootfs"/usr/share/locale/*
    echo "ptah:x:65532:65532:ptah-operator:/nonexistent:/usr/sbin/nologin" >>"$rootfs/etc/passwd"
    echo "ptah:x:65532:" >>"$rootfs/etc/group"
    ctr=$(bah from scratch)
    CONTAINERS+=("$ctr")
    mnt=$(bah mount "$ctr")
    tar -C "$rootfs" --exclude='./dev/*' --exclude='./proc/*' --exclude='./sys/*' -cf - . \
        | tar -C "$mnt" -xf -
    bah umount "$ctr" >/dev/null
    bah config --env PATH=/usr/bin:/bin --user 65532:65532 --workingdir / "$ctr"
    bah commit --quiet --rm "$ctr" "$BASE" >/dev/null
    rm -rf "$rootfs"
fi
base_id=$(bah inspect --type image --format '{{.FromImageID}}' "$BASE")

# -- 2. what is out of date ----------------------------------------------------------------
# The versions the tests ran with pin every transitive dependency the images install.
constraints="$OUT/constraints.txt"
"$PYTHON" -m pip freeze --exclude-editable --disable-pip-version-check >"$constraints"
declare -A FINGERPRINT
stale=()
for image in "${ORDER[@]}"; do
    name=${ARCHIVE[$image]}
    FINGERPRINT[$image]=$("$PYTHON" "$ROOT/images/inputs.py" fingerprint "$image" "$base_id" "$constraints")
    if [ -f "$OUT/$name.oci.tar" ] && [ -f "$OUT/$name.digest" ] \
        && [ "$(cat "$OUT/$name.inputs" 2>/dev/null)" = "${FINGERPRINT[$image]}" ]; then
        stamp "image $name: cached ($(cat "$OUT/$name.digest"))"
    else
        stale+=("$image")
    fi
done
if [ "${#stale[@]}" -eq 0 ]; then
    stamp "every image cached in $(( $(date +%s) - started ))s"
    exit 0
fi

# -- 3. the build context ------------------------------------------------------------------
stamp "wheels: this project, the executor's dependencies, pinned as .venv runs them"
context="$OUT/context"
rm -rf "$context"
mkdir -p "$context/wheels" "$context/lab-executor/lab/executor"
"$PYTHON" "$ROOT/images/inputs.py" requirements lab-executor \
    >"$context/lab-executor/requirements.txt"
# setuptools reuses build/lib between builds, and reads the SOURCES.txt of an egg-info
# left by an earlier build or editable install as part of the manifest: a module deleted,
# moved or excluded since then (kube/fake) would otherwise still be packed into this one.
rm -rf "$ROOT/build/lib" "$ROOT"/build/bdist.* "$ROOT"/*.egg-info
"$PYTHON" -m pip wheel --quiet --disable-pip-version-check --constraint "$constraints" \
    --wheel-dir "$context/wheels" "$ROOT" --requirement "$context/lab-executor/requirements.txt"
cp "$ROOT/lab/__init__.py" "$context/lab-executor/lab/"
cp "$ROOT"/lab/executor/*.py "$context/lab-executor/lab/executor/"
cp "$ROOT/images/lab-executor/ptah" "$context/lab-executor/ptah"
# The lab layer of the lab's manager image (images/inputs.py LAB_MANAGER_FILES).
mkdir -p "$context/lab-manager/lab"
for file in $("$PYTHON" -c 'import sys; sys.path.insert(0, sys.argv[1]); import inputs; print(" ".join(inputs.LAB_MANAGER_FILES))' "$ROOT/images"); do
    cp "$ROOT/$file" "$context/lab-manager/lab/"
done
# The scratch images' entry point and MariaDB's init file (images/scratch).
cp -r "$ROOT/images/scratch" "$context/scratch"

# -- 4 and 5. build and smoke-check -----------------------------------------------------
# Each check runs an exec-form argv in a container of the image, whose shells are gone
# (the Containerfiles remove them): whatever runs here needs no shell. One container
# per image: with vfs storage every container is a full copy of the image.
in_ctr() { # container, argv...
    local ctr=$1
    shift
    bah run --isolation chroot "$ctr" -- "$@"
}

no_shell() { # container python
    local found
    found=$(in_ctr "$1" "$2" -c 'import os
print(" ".join(p for p in ("/bin/sh", "/bin/bash", "/bin/dash", "/usr/bin/sh", "/usr/bin/bash") if os.path.lexists(p)))')
    [ -z "$found" ] || fail "the image still holds a shell: $found"
    echo "no shell in the image (/bin/sh, /bin/bash, /bin/dash absent)"
}

uid_of() { # container python
    local uid
    uid=$(in_ctr "$1" "$2" -c 'import os; print(os.getuid(), os.getgid())')
    [ "$uid" = "65532 65532" ] || fail "the image runs as uid/gid $uid, not 65532"
    echo "runs as uid/gid $uid"
}

smoke_manager() {
    local ctr=$1 runner held
    in_ctr "$ctr" ptah-manager --help | head -1
    in_ctr "$ctr" python -m manager --help | head -1
    uid_of "$ctr" python
    # With no Job environment the runner refuses with its own sentence (and exit 2),
    # which proves it starts; buildah's lines about the non-zero exit are dropped.
    runner=$(in_ctr "$ctr" python -m runner 2>&1 | grep '^ptah-runner: ' || true)
    case "$runner" in
        "ptah-runner: no result can be bound to an attempt"*) ;;
        *) fail "the runner did not start" ;;
    esac
    echo "runner, no Job environment: $runner"
    # What ships holds no lab module, no API double and no fault injection.
    held=$(in_ctr "$ctr" python -c 'import importlib.util as u
print(" ".join(m for m in ("lab", "kube.fake", "manager.labfaults") if u.find_spec(m)))')
    [ -z "$held" ] || fail "the manager image holds $held"
    echo "no lab, kube.fake or manager.labfaults in the image"
    no_shell "$ctr" python
}

smoke_lab_manager() {
    local ctr=$1
    in_ctr "$ctr" python -m lab.manager --help | head -1
    in_ctr "$ctr" python -c 'import lab.labfaults, lab.manager; print("lab.manager and its fault hooks import")'
    uid_of "$ctr" python
    no_shell "$ctr" python
}

# The scratch server listens on the contract's fixed port on 127.0.0.1, so its check
# runs in a network namespace of its own (loopback only): a database on this machine's
# 5432 or 3306, or another build's check, is neither reached nor in the way.
in_own_net() { # container, argv...
    unshare --net -- bash -c 'ip link set lo up && exec "$@"' in_own_net \
        buildah --root "$STORE/root" --runroot "$STORE/run" --storage-driver vfs \
        run --isolation chroot "$1" -- "${@:2}"
}

smoke_scratch() { # container engine
    local ctr=$1 engine=$2 log
    uid_of "$ctr" python3
    # The check's own lines on stdout; the server's log kept aside for a failure.
    log=$(mktemp /var/tmp/ptah-smoke-XXXXXX)
    TEMPS+=("$log")
    in_own_net "$ctr" python3 -c "$(cat "$ROOT/images/scratch/smoke.py")" \
        "$engine" /usr/local/bin/ptah-scratch "$engine" 2>"$log" \
        || { tail -20 "$log" >&2; fail "the $engine scratch image failed its smoke check"; }
}

smoke_scratch_postgresql() { smoke_scratch "$1" postgresql; }
smoke_scratch_mariadb() { smoke_scratch "$1" mariadb; }

smoke_lab_executor() {
    local ctr=$1 spelling said
    for spelling in version --version; do
        said=$(in_ctr "$ctr" /usr/local/bin/ptah "$spelling")
        case "$said" in
            "ptah-compatible lab executor, PostgreSQL subset "*) echo "ptah $spelling: $said" ;;
            *) fail "ptah $spelling said '$said', not the stand-in's words" ;;
        esac
    done
    uid_of "$ctr" python3
    no_shell "$ctr" python3
}

for image in "${stale[@]}"; do
    name=${ARCHIVE[$image]}
    tag="localhost/$name:dev"
    stamp "image $name from images/$image/Containerfile"
    args=(--build-arg "BASE=$BASE")
    if [ "$image" = lab-manager ]; then
        args+=(--build-arg "MANAGER=localhost/${ARCHIVE[manager]}:dev")
    fi
    bah bud --quiet --isolation chroot "${args[@]}" \
        -f "$ROOT/images/$image/Containerfile" -t "$tag" "$context" >/dev/null
    case "$image" in
        scratch-*) stamp "smoke $name: as uid 65532, serving scratch on loopback, stopped by SIGTERM" ;;
        *) stamp "smoke $name: as uid 65532, no shell in the image" ;;
    esac
    ctr=$(bah from --quiet "$tag")
    CONTAINERS+=("$ctr")
    "smoke_${image//-/_}" "$ctr"
    bah rm "$ctr" >/dev/null
    CONTAINERS=()
    stamp "export $name: OCI archive and digest"
    rm -f "$OUT/$name.oci.tar" "$OUT/$name.digest" "$OUT/$name.inputs"
    bah push --quiet --digestfile "$OUT/$name.digest.new" "$tag" \
        "oci-archive:$OUT/$name.oci.tar:$name:dev"
done

# -- 6. the digests a registry keeps ---------------------------------------------------
stamp "verify: push to a throw-away registry on 127.0.0.1, compare digests"
[ -x "$CRANE" ] || fail "crane is missing: run \`make crane\`"
scratch=$(mktemp -d /var/tmp/ptah-images-XXXXXX)
TEMPS+=("$scratch")
mkdir -p "$scratch/registry" # crane's --disk store must exist before the first upload
"$CRANE" registry serve --address 127.0.0.1:0 --disk "$scratch/registry" >"$scratch/registry.log" 2>&1 &
REGISTRY_PID=$!
port=
for _ in $(seq 100); do # it says its port when it listens; bounded
    port=$(sed -n 's/.*serving on port \([0-9][0-9]*\).*/\1/p' "$scratch/registry.log")
    [ -n "$port" ] && break
    kill -0 "$REGISTRY_PID" 2>/dev/null || fail "the registry exited: $(cat "$scratch/registry.log")"
    sleep 0.1
done
[ -n "$port" ] || fail "the registry never said its port"
for image in "${stale[@]}"; do
    name=${ARCHIVE[$image]}
    layout="$scratch/$name"
    mkdir -p "$layout"
    tar -C "$layout" -xf "$OUT/$name.oci.tar"
    "$CRANE" push --insecure "$layout" "127.0.0.1:$port/$name:dev" >"$scratch/push.log" 2>&1 \
        || fail "crane could not push $name.oci.tar: $(tail -3 "$scratch/push.log")"
    kept=$("$CRANE" digest --insecure "127.0.0.1:$port/$name:dev")
    built=$(cat "$OUT/$name.digest.new")
    [ "$kept" = "$built" ] || fail "$name: buildah wrote $built, the registry kept $kept"
    mv "$OUT/$name.digest.new" "$OUT/$name.digest"
    # Written last: an interrupted build leaves no fingerprint, so the next run rebuilds.
    echo "${FINGERPRINT[$image]}" >"$OUT/$name.inputs"
    size=$(du -h "$OUT/$name.oci.tar" | cut -f1)
    stamp "$name $kept ($size), the digest the registry kept"
done
kill "$REGISTRY_PID"
wait "$REGISTRY_PID" 2>/dev/null || true
REGISTRY_PID=
stamp "images built in $(( $(date +%s) - started ))s"
