#!/usr/bin/env bash
# Repairs in the simulated fabric: on a 3-level fat tree made by `ibsm gen fat-tree`, a core
# link (spine to core), a leaf-to-spine link and a whole spine switch (rebooting, 50 ms
# dark) go down and come back, one scenario each; every repair's figures are printed as a
# markdown table (recovery_ms is wall time, trap arrival to the last Set acknowledged).
#
#   ibsm gen fat-tree --levels 3 --radix 36 -o ft3-36.net && tools/repair-bench.sh ft3-36.net
#   ibsm gen fat-tree --levels 3 --radix 64 --pods 40 -o ft3-64-40.net && tools/repair-bench.sh ft3-64-40.net
#
# RUNS (default 3) runs per scenario; the table shows each repair's median and range.
# POD (default 1) and LEAF (default 1) pick the pod and the leaf; POD=0 LEAF=0 puts every
# event in the SM's own pod (the SM runs on the fabric's first host) and on its leaf.
# ENGINE (default minhop) is the routing chain. IBSM names the binary (default:
# target/release/ibsm, else ibsm on PATH). Every run also checks every CA pair after each
# sweep (the unreachable column); on the largest trees that check takes most of the time.
set -euo pipefail
[[ $# -ge 1 && -r $1 ]] || { echo "usage: $0 FABRIC.net" >&2; exit 2; }
net=$1 runs=${RUNS:-3} engine=${ENGINE:-minhop} pod=${POD:-1} leaf=${LEAF:-1}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
IBSM=${IBSM:-$here/target/release/ibsm}
[[ -x $IBSM ]] || IBSM=$(command -v ibsm) || { echo "no ibsm binary; build with cargo build --release" >&2; exit 2; }
grep -q '"spine 1 pod 1"' "$net" && grep -q '"leaf 1 pod 1"' "$net" \
    || { echo "$net: not a 3-level fat tree from ibsm gen fat-tree (no \"spine 1 pod 1\")" >&2; exit 2; }
radix=$(awk '/^Switch/ {print $2; exit}' "$net")
up=$((radix / 2 + 1))
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

printf 'at 20s link-down "spine 0 pod %d"[%d]\nat 22s link-up "spine 0 pod %d"[%d]\n' "$pod" "$up" "$pod" "$up" > "$scratch/core.scn"
printf 'at 20s link-down "leaf %d pod %d"[%d]\nat 22s link-up "leaf %d pod %d"[%d]\n' "$leaf" "$pod" "$((up + 1))" "$leaf" "$pod" "$((up + 1))" > "$scratch/leaf.scn"
printf 'at 20s reboot "spine 1 pod %d" down 50ms\n' "$pod" > "$scratch/switch.scn"

echo "$(basename "$net"): radix $radix, engine $engine, $runs runs per scenario, pod $pod, leaf $leaf"
echo
echo "| scenario | repair | recovery_ms median (range) | SMPs | LFT blocks | moved | moved_min | restored | heavy sweeps | unreachable pairs after |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for s in core leaf switch; do
    for run in $(seq 1 "$runs"); do
        "$IBSM" run --sim "$net" --routing "$engine" --scenario "$scratch/$s.scn" --run-for 23s \
            --report json 2>"$scratch/$s.$run.log" > "$scratch/$s.$run.json" \
            || { echo "| $s | run $run failed: $(tail -1 "$scratch/$s.$run.log") |"; continue; }
    done
    python3 - "$s" "$scratch" "$runs" <<'PY'
import json, statistics, sys
name, scratch, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
per_run = []
for run in range(1, runs + 1):
    try:
        sweeps = json.load(open(f"{scratch}/{name}.{run}.json"))
    except Exception:
        continue
    # The bring-up is the first sweep; what follows are the scenario's repairs.
    per_run.append(sweeps[1:])
if not per_run:
    sys.exit()
heavy = [sum(1 for s in r if s["heavy"]) for r in per_run]
count = min(len(r) for r in per_run)
for i in range(count):
    rs = [r[i] for r in per_run]
    rec = [s["recovery_ms"] for s in rs]
    s = rs[0]
    print(f"| {name} | {i + 1}: {s['trigger'][:60]} | {statistics.median(rec):.1f} ({min(rec):.1f}-{max(rec):.1f}) "
          f"| {s['mads_sent']} | {s['lft_blocks_sent']} | {s['lft_entries_moved']} | {s['lft_entries_moved_min']} "
          f"| {s['lft_entries_restored']} | {max(heavy)} | {max(r[i]['unreachable_pairs'] for r in per_run)} |")
PY
done
