#!/usr/bin/env bash
# OpenSM's osmtest flows under ibsim, against ibsm's SA and against OpenSM's:
#
#   tools/osmtest-ibsim.sh [FABRIC.net] [FLOWS]
#
# For each SM (SMS, default "ibsm opensm"), in its own network namespace with its own
# ibsim: the SM on the fabric's first HCA (SIM_HOST, default Hca1), osmtest on the second
# (CLIENT, default Hca2). `osmtest -f c` writes the inventory first; then every flow of
# FLOWS (default "c v a s e m q") runs with it, each bounded by `timeout 90` (under the shim
# osmtest never times out a query of its own). Prints PASS / FAIL / TIMEOUT per flow and
# SM (OSMTEST_ARGS adds options, e.g. "-v -v"); each flow's last lines are in the scratch directory (KEEP_SCRATCH=1 keeps it).
#
# FABRIC defaults to ibsim's net.2sw2path4hca. IBSM names the binary (default
# target/release/ibsm, else target/debug/ibsm). Runs as root (unshare -n). Needs
# ibsim-utils libumad2sim0 infiniband-diags opensm.
set -euo pipefail

SHIM=${SHIM:-/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so}
die() { echo "osmtest-ibsim: $*" >&2; exit 1; }

if [[ ${1:-} != --inner ]]; then
    net=${1:-/usr/share/doc/ibsim-utils/net-examples/net.2sw2path4hca}
    flows=${2:-c v a s e m q}
    [[ -r $net ]] || die "usage: $0 [FABRIC.net] [FLOWS]"
    net=$(cd "$(dirname "$net")" && pwd)/$(basename "$net")
    here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
    if [[ -z ${IBSM:-} ]]; then
        for c in "$here/target/release/ibsm" "$here/target/debug/ibsm" "$(command -v ibsm || true)"; do
            [[ -n $c && -x $c ]] && { IBSM=$c; break; }
        done
    fi
    [[ -n ${IBSM:-} && -x $IBSM ]] || die "no ibsm binary (cargo build --release -p sm-daemon, or set IBSM)"
    IBSM=$(realpath "$IBSM")
    for t in ibsim osmtest smpquery saquery opensm ip unshare timeout; do
        command -v "$t" >/dev/null || die "missing $t (apt-get install ibsim-utils libumad2sim0 infiniband-diags opensm)"
    done
    [[ -r $SHIM ]] || die "missing $SHIM (apt-get install libumad2sim0)"
    for sm in ${SMS:-ibsm opensm}; do
        scratch=$(mktemp -d "${TMPDIR:-/tmp}/osmtest-ibsim.XXXXXX")
        rc=0
        SHIM=$SHIM IBSM=$IBSM NET=$net FLOWS=$flows SM=$sm \
            timeout --kill-after=10 1800 unshare -n "$0" --inner "$scratch" || rc=$?
        if [[ $rc -ne 0 || -n ${KEEP_SCRATCH:-} ]]; then
            echo "osmtest-ibsim: $sm logs kept in $scratch" >&2
        else
            rm -rf "$scratch"
        fi
        [[ $rc -eq 0 ]] || exit $rc
    done
    exit 0
fi

# Inside the namespace.
cd "$2"
ip link set lo up
ibsim -s "$NET" --no-console > ibsim.log 2>&1 &
sim=$!
smpid=
cleanup() {
    [[ -n $smpid ]] && { kill "$smpid" 2>/dev/null; wait "$smpid" 2>/dev/null || true; }
    kill $sim 2>/dev/null
    wait $sim 2>/dev/null || true
}
trap cleanup EXIT
host=${SIM_HOST:-Hca1}
client=${CLIENT:-Hca2}
t() { SIM_HOST=$client LD_PRELOAD=$SHIM timeout "$@"; }
for _ in $(seq 1 200); do
    t 20 smpquery -D nodeinfo 0 >/dev/null 2>&1 && break
    sleep 0.05
done
if [[ $SM == ibsm ]]; then
    SIM_HOST=$host LD_PRELOAD=$SHIM RUST_LOG=${RUST_LOG:-info} NO_COLOR=1 "$IBSM" run --umad > sm.log 2>&1 &
    smpid=$!
else
    mkdir -p osm
    SIM_HOST=$host LD_PRELOAD=$SHIM OSM_TMP_DIR=$PWD/osm OSM_CACHE_DIR=$PWD/osm \
        opensm -f "$PWD/osm/osm.log" > sm.log 2>&1 &
    smpid=$!
fi
ready() { t 20 saquery -c >/dev/null 2>&1; }
for _ in $(seq 1 600); do
    ready && break
    sleep 0.05
done
ready || die "$SM did not come up: $(tail -5 sm.log)"
sleep 1
for f in $FLOWS; do
    rc=0
    t 90 osmtest ${OSMTEST_ARGS:-} -f "$f" -i inv.dat > "flow-$f.log" 2>&1 || rc=$?
    case $rc in
        0) r=PASS ;;
        124) r=TIMEOUT ;;
        *) r="FAIL($rc)" ;;
    esac
    printf '%-8s -f %s  %s\n' "$SM" "$f" "$r"
done
