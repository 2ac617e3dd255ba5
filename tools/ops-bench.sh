#!/usr/bin/env bash
# What operators' clients cost on a large fabric: ibsm run --sim keeps the subnet up in
# the background with --metrics and a status socket; then a Prometheus scrape, ibsm status
# and ibsm ports are each timed (best of RUNS) and their sizes printed.
#
#   ibsm gen fat-tree --levels 3 --radix 64 --pods 40 -o ft3-64-40.net
#   RUNS=5 tools/ops-bench.sh ft3-64-40.net
#
# CONFIG=FILE runs the SM with that configuration (e.g. [perfmgr] on with [metrics]
# per_port, to see what per-port metrics cost) and waits WAIT seconds (default 3) for its
# first counter sweep before measuring.
set -euo pipefail
net=${1:?usage: tools/ops-bench.sh FABRIC.net}
runs=${RUNS:-5}
ibsm=${IBSM:-$(command -v ibsm || echo target/release/ibsm)}
addr=${ADDR:-127.0.0.1:19464}
dir=$(mktemp -d)
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$dir"' EXIT
"$ibsm" run --sim "$net" --state-dir "$dir" --metrics "$addr" ${CONFIG:+--config "$CONFIG"} 2> "$dir/log" &
pid=$!
for _ in $(seq 1 600); do
    grep -q "sweeping until" "$dir/log" 2>/dev/null && break
    sleep 0.5
done
grep -q "sweeping until" "$dir/log" || { cat "$dir/log"; exit 1; }
[ -n "${CONFIG:-}" ] && sleep "${WAIT:-3}"
best() { # best wall time in ms of "$@" over $runs runs, output to $dir/out
    local b=999999999999 t0 t1
    for _ in $(seq 1 "$runs"); do
        t0=$(date +%s%N); "$@" > "$dir/out"; t1=$(date +%s%N)
        t=$(( (t1 - t0) / 1000 ))
        [ "$t" -lt "$b" ] && b=$t
    done
    printf '%d.%03d ms' $((b / 1000)) $((b % 1000))
}
"$ibsm" status --state-dir "$dir" | grep -E '^(fabric|last sweep)' 
echo "peak RSS of the SM up: $(grep VmHWM /proc/$pid/status | awk '{print $2, $3}')"
echo "scrape:        $(best curl -sf "http://$addr/metrics"), $(wc -c < "$dir/out") bytes, $(grep -vc '^#' "$dir/out") samples"
echo "ibsm status:   $(best "$ibsm" status --state-dir "$dir" --json), $(wc -c < "$dir/out") bytes"
echo "ibsm ports:    $(best "$ibsm" ports --state-dir "$dir" --json), $(wc -c < "$dir/out") bytes"
echo "peak RSS of the SM after the queries: $(grep VmHWM /proc/$pid/status | awk '{print $2, $3}')"
