#!/usr/bin/env bash
# One counter sweep of every linked port under ibsim: `ibsm run --umad` with the
# performance manager on, until its first "port counters read" line (ports, answers, MADs,
# milliseconds).
#
#   ibsm gen fat-tree --levels 3 --radix 36 -o ft3-36.net && tools/perfmgr-ibsim.sh ft3-36.net
#
# IBSM names the binary (default target/release/ibsm). Runs in a private network namespace
# (root). Needs ibsim-utils libumad2sim0.
set -euo pipefail
if [[ ${1:-} != --inner ]]; then
    net=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
    ibsm=$(cd "$(dirname "${IBSM:-target/release/ibsm}")" && pwd)/$(basename "${IBSM:-target/release/ibsm}")
    flags=$(awk '/^Switch/ {s++; p += $2 + 1} /^(Ca|Hca|Rt)/ {c++; p += $2}
        END {n = s + c; printf "-N %d -S %d -P %d", (n > 2048 ? n : 2048), (s > 256 ? s : 256), p + 1}' "$net")
    dir=$(mktemp -d)
    trap 'rm -rf "$dir"' EXIT
    NET=$net IBSM=$ibsm FLAGS=$flags timeout --kill-after=10 1800 unshare -n "$0" --inner "$dir"
    exit
fi
dir=$2
cd "$dir"
ip link set lo up
shim=$(ls /usr/lib/*/umad2sim/libumad2sim.so | head -1)
# shellcheck disable=SC2086
ibsim -s "$NET" $FLAGS --no-console > ibsim.log 2>&1 &
sim=$!
for _ in $(seq 1 600); do
    LD_PRELOAD=$shim smpquery -D nodeinfo 0 > /dev/null 2>&1 && break
    sleep 0.2
done
printf '[perfmgr]\nenabled = true\ninterval_s = 3600\n' > ibsm.toml
RUST_LOG=info NO_COLOR=1 LD_PRELOAD=$shim "$IBSM" run --umad --config ibsm.toml \
    --state-dir st 2> sm.log &
sm=$!
for _ in $(seq 1 3000); do
    grep -q "port counters read" sm.log && break
    sleep 0.2
done
grep -E "SUBNET UP|port counters read" sm.log | sed 's/^[^ ]* *//'
kill $sm; wait $sm 2>/dev/null || true
kill $sim; wait $sim 2>/dev/null || true
