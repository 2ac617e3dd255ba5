#!/usr/bin/env bash
# Brings a fabric up with `ibsm run --umad --once` against ibsim, for fabrics too big for
# the test suite, and prints ibsm's JSON report:
#
#   tools/umad-ibsim.sh FABRIC.net [ibsm run options, e.g. --routing updn --dump-dir DIR]
#   ibsm gen fat-tree --levels 3 --radix 36 --pods 8 -o big.net && tools/umad-ibsim.sh big.net
#
# IBSM names the binary (default: target/release/ibsm, else target/debug/ibsm, else ibsm on
# PATH); IBSIM_FLAGS overrides the -N/-S/-P limits counted from the file; SIM_HOST picks the
# SM's node (default: the file's first node). Runs in a private network namespace (root) from
# a scratch directory that is removed afterwards (KEEP_SCRATCH=1 keeps it, with ibsim's and
# ibsm's logs). Needs ibsim-utils libumad2sim0 infiniband-diags.
set -euo pipefail

die() { echo "umad-ibsim: $*" >&2; exit 1; }
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=lib/sm-in-ibsim.sh
source "$here/tools/lib/sm-in-ibsim.sh"

if [[ ${1:-} != --inner ]]; then
    [[ $# -ge 1 && -r $1 ]] || die "usage: $0 FABRIC.net [ibsm run options]"
    net=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
    shift
    find_ibsm "$here"
    need ibsim smpquery ip unshare timeout
    if [[ -z ${IBSIM_FLAGS:-} ]]; then
        IBSIM_FLAGS=$(awk '/^Switch/ {s++; p += $2 + 1} /^(Ca|Hca|Rt)/ {c++; p += $2}
            END {n = s + c; printf "-N %d -S %d -P %d", (n > 2048 ? n : 2048), (s > 256 ? s : 256), p + 1}' "$net")
    fi
    scratch=$(mktemp -d "${TMPDIR:-/tmp}/umad-ibsim.XXXXXX")
    rc=0
    SHIM=$SHIM IBSM=$IBSM IBSIM_FLAGS=$IBSIM_FLAGS NET=$net \
        timeout --kill-after=10 3600 unshare -n "$0" --inner "$scratch" "$@" || rc=$?
    if [[ $rc -ne 0 || -n ${KEEP_SCRATCH:-} ]]; then
        echo "umad-ibsim: logs kept in $scratch" >&2
    else
        rm -rf "$scratch"
    fi
    exit $rc
fi

# Inside the namespace.
shift
cd "$1"
shift
ip link set lo up
# shellcheck disable=SC2086
ibsim -s "$NET" --no-console $IBSIM_FLAGS > ibsim.log 2>&1 &
sim=$!
trap 'kill $sim 2>/dev/null; wait $sim 2>/dev/null' EXIT
for _ in $(seq 1 1200); do
    kill -0 $sim 2>/dev/null || die "ibsim exited early: $(tail -5 ibsim.log)"
    LD_PRELOAD=$SHIM timeout 10 smpquery -D nodeinfo 0 > /dev/null 2>&1 && break
    sleep 0.1
done
rc=0
LD_PRELOAD=$SHIM timeout 3000 "$IBSM" run --umad --once --report json "$@" 2> ibsm.log || rc=$?
[[ $rc -eq 0 ]] || tail -20 ibsm.log >&2
kill $sim 2>/dev/null || true
wait $sim 2>/dev/null || true
trap - EXIT
exit $rc
