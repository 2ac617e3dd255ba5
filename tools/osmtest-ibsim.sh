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
# SM (OSMTEST_ARGS adds options, e.g. "-v -v"); each flow's output is in the scratch
# directory (KEEP_SCRATCH=1 keeps it).
#
# FABRIC defaults to ibsim's net.2sw2path4hca. IBSM names the binary (default
# target/release/ibsm, else target/debug/ibsm). Runs as root (unshare -n). Needs
# ibsim-utils libumad2sim0 infiniband-diags opensm.
set -euo pipefail

die() { echo "osmtest-ibsim: $*" >&2; exit 1; }
# shellcheck source=lib/sm-in-ibsim.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/sm-in-ibsim.sh"

if [[ ${1:-} != --inner ]]; then
    net=${1:-/usr/share/doc/ibsim-utils/net-examples/net.2sw2path4hca}
    flows=${2:-c v a s e m q}
    [[ -r $net ]] || die "usage: $0 [FABRIC.net] [FLOWS]"
    net=$(cd "$(dirname "$net")" && pwd)/$(basename "$net")
    find_ibsm "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
    need ibsim osmtest smpquery saquery opensm ip unshare timeout
    per_sm osmtest-ibsim "${SMS:-ibsm opensm}" NET="$net" FLOWS="$flows"
    exit 0
fi

# Inside the namespace.
cd "$2"
start_sm "${RUST_LOG:-info}"
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
