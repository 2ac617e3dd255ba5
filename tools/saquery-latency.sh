#!/usr/bin/env bash
# saquery latency under ibsim, ibsm's SA against OpenSM's, on the same fabric:
#
#   tools/saquery-latency.sh [FABRIC.net] [RUNS]
#
# For each SM (ibsm: `ibsm run --umad` in the background; OpenSM: `opensm` in the
# background), in its own network namespace with its own ibsim, both SMs on the fabric's
# first HCA (SIM_HOST, default Hca1) and the client on the second (CLIENT, default Hca2):
# RUNS (default 50) timed runs each of
#   saquery PR --slid S --dlid D      (one PathRecord between the two hosts)
#   saquery NR L                      (the NodeRecord of the client's LID)
#   saquery -c                        (ClassPortInfo: the same tool start-up, the least SA work)
# and the median wall time of each, in milliseconds. A run is the whole diag process (start,
# the shim attaching to ibsim, one SA round trip, exit), so the process start-up is in every
# figure; ClassPortInfo's median is the baseline to subtract for the SA's own share.
#
# FABRIC defaults to ibsim's net.2sw2path4hca. IBSM names the binary (default
# target/release/ibsm, else target/debug/ibsm). Runs as root (unshare -n) from scratch
# directories that are removed afterwards (KEEP_SCRATCH=1 keeps them). Needs ibsim-utils
# libumad2sim0 infiniband-diags opensm.
set -euo pipefail

die() { echo "saquery-latency: $*" >&2; exit 1; }
# shellcheck source=lib/sm-in-ibsim.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/sm-in-ibsim.sh"

if [[ ${1:-} != --inner ]]; then
    net=${1:-/usr/share/doc/ibsim-utils/net-examples/net.2sw2path4hca}
    runs=${2:-50}
    [[ -r $net ]] || die "usage: $0 [FABRIC.net] [RUNS]"
    net=$(cd "$(dirname "$net")" && pwd)/$(basename "$net")
    find_ibsm "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
    need ibsim saquery opensm ip unshare timeout
    printf '%-8s %8s %8s %8s   (median ms over %d runs; %s)\n' SM PR NR CPI "$runs" "$(basename "$net")"
    per_sm saquery-latency "ibsm opensm" NET="$net" RUNS="$runs"
    exit 0
fi

# Inside the namespace.
cd "$2"
start_sm warn
# The two hosts' LIDs, as this SM assigned them: the client's own port (directed route 0)
# says its LID and the SM's, which runs on the other host.
field() { t 20 smpquery -D portinfo 0 2>/dev/null | awk -F'[:.]+' -v f="$1" '$1 == f {print $2}'; }
# Up: the client's port has its LID and the SA answers.
ready() {
    local l
    l=$(field Lid)
    [[ -n $l && $l != 0 ]] && t 20 saquery -c >/dev/null 2>&1
}
for _ in $(seq 1 600); do
    ready && break
    sleep 0.05
done
ready || die "$SM did not come up: $(tail -5 sm.log)"
s=$(field SMLid)
d=$(field Lid)
[[ -n $s && -n $d ]] || die "no LIDs for $host / $client"
median() {
    local n=0 xs=()
    for _ in $(seq 1 "$RUNS"); do
        local a b
        a=$(date +%s%N)
        t 20 "$@" >/dev/null 2>&1 || die "$SM: $* failed"
        b=$(date +%s%N)
        xs+=($(( (b - a) / 1000 )))
        n=$((n + 1))
    done
    printf '%s\n' "${xs[@]}" | sort -n | awk '{v[NR] = $1} END {m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.2f", m / 1000}'
}
pr=$(median saquery PR --slid "$s" --dlid "$d")
nr=$(median saquery NR "$d")
cpi=$(median saquery -c)
printf '%-8s %8s %8s %8s\n' "$SM" "$pr" "$nr" "$cpi"
