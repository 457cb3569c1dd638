#!/usr/bin/env bash
# One build phase of `make run` / `make test` (the virtualenv, the control plane, helm,
# crane, the node's packages, the images), said in one line when it starts and one
# when it ends with what it cost, or one line when nothing needs doing. The tool's own
# output (go's module downloads, apt, pip) goes to build/logs/<name>.log; when the
# phase fails, that log is named and its last 40 lines are printed, and the phase
# exits with the tool's own status, so make fails as it did before.
#
#   lab/phase.sh NAME DESCRIPTION [--cached-if SHELL-COMMAND] [--show REGEX] -- COMMAND...
#
#   --cached-if  when this command succeeds, nothing needs doing: "# NAME: cached", and
#                COMMAND is not run (for a file make builds: `make -q FILE`)
#   --show       the lines of COMMAND's output that match REGEX (bash =~) are printed
#                as well as logged (images/build.sh's short "# HH:MM:SS" progress lines)
#
# The Makefile's recipes call it, so this rule lives in one place.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
LOGS=${PHASE_LOGS:-"$ROOT/build/logs"}
TAIL_LINES=40

usage() {
    echo "usage: lab/phase.sh NAME DESCRIPTION [--cached-if COMMAND] [--show REGEX] -- COMMAND..." >&2
    exit 2
}

[ "$#" -ge 2 ] || usage
name=$1 description=$2
shift 2
cached_if="" show=""
while [ "$#" -gt 0 ]; do
    case "$1" in
        --cached-if) [ "$#" -ge 2 ] || usage; cached_if=$2; shift 2 ;;
        --show) [ "$#" -ge 2 ] || usage; show=$2; shift 2 ;;
        --) shift; break ;;
        *) usage ;;
    esac
done
[ "$#" -ge 1 ] || usage
case "$name" in
    */* | "" | . | ..) echo "phase: a phase name names its log file, not a path: '$name'" >&2; exit 2 ;;
esac

# A phase inside another (its command runs make, whose recipe is a phase too, as
# `make setup` runs the virtualenv's own recipe): the outer phase has said what is
# happening and logs this output, so the inner one only runs its command.
if [ -n "${PTAH_PHASE:-}" ]; then
    exec "$@"
fi
export PTAH_PHASE=$name

# 75 s -> "1 min 15 s": what a person reads beside the cold estimate.
took() {
    local s=$(( $(date +%s) - started ))
    if [ "$s" -ge 60 ]; then printf '%d min %d s' $((s / 60)) $((s % 60)); else printf '%d s' "$s"; fi
}

if [ -n "$cached_if" ] && bash -c "$cached_if" >/dev/null 2>&1; then
    echo "# $name: cached"
    exit 0
fi

mkdir -p "$LOGS" || { echo "phase: cannot create $LOGS for the $name log" >&2; exit 1; }
log="$LOGS/$name.log"
shown=${log#"$ROOT"/}
echo "# $description ... (log: $shown)"
started=$(date +%s)
if [ -n "$show" ]; then
    # Everything to the log; the matching lines to the terminal as they come.
    : >"$log"
    "$@" 2>&1 </dev/null | while IFS= read -r line || [ -n "$line" ]; do
        printf '%s\n' "$line" >>"$log"
        if [[ $line =~ $show ]]; then printf '%s\n' "$line"; fi
    done
    status=${PIPESTATUS[0]}
else
    "$@" >"$log" 2>&1 </dev/null
    status=$?
fi
if [ "$status" -ne 0 ]; then
    {
        echo "# $name: failed after $(took) (exit $status); the last $TAIL_LINES lines of $shown:"
        tail -n "$TAIL_LINES" "$log"
    } >&2
    exit "$status"
fi
echo "# $name: done in $(took)"
