#!/usr/bin/env bash
# Brings a fabric up under MAD loss with many seeds and counts the runs where the subnet
# came up with every node configured (subnet up, every node found, none unresponsive,
# every CA pair delivered by the tracer):
#
#   tools/reliability-loss.sh FABRIC.net LOSS [SEEDS]
#   ibsm gen fat-tree --levels 3 --radix 8 -o ft3-128.net && tools/reliability-loss.sh ft3-128.net 0.2 100
#
# IBSM names the binary (default: target/release/ibsm, else ibsm on PATH). Prints one line
# per failing seed and a summary line.
set -euo pipefail
[[ $# -ge 2 && -r $1 ]] || { echo "usage: $0 FABRIC.net LOSS [SEEDS]" >&2; exit 2; }
net=$1 loss=$2 seeds=${3:-100}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
IBSM=${IBSM:-$here/target/release/ibsm}
[[ -x $IBSM ]] || IBSM=$(command -v ibsm) || { echo "no ibsm binary; build with cargo build --release" >&2; exit 2; }
nodes=$(awk '/^(Switch|Ca|Hca|Rt)/ {n++} END {print n}' "$net")
ok=0 lost=0 unresp=0
for seed in $(seq 1 "$seeds"); do
    json=$("$IBSM" run --sim "$net" --once --loss "$loss" --seed "$seed" --report json 2>/dev/null) || true
    line=$(printf '%s' "$json" | python3 -c '
import json, sys
try:
    r = json.load(sys.stdin)
except Exception:
    print("crash 0 0 0"); sys.exit()
print("up" if r["subnet_up"] else "down", r["nodes"], len(r["unresponsive"]), r["unreachable_pairs"], r["mads_lost"])')
    read -r state n u pairs ml <<<"$line"
    lost=$((lost + ${ml:-0}))
    if [[ $state == up && $n == "$nodes" && $u == 0 && $pairs == 0 ]]; then
        ok=$((ok + 1))
    else
        [[ $u != 0 ]] && unresp=$((unresp + 1))
        echo "seed $seed: $state, $n of $nodes nodes, $u unresponsive, $pairs pairs undelivered"
    fi
done
echo "$net loss $loss: $ok of $seeds seeds up with every node configured ($unresp with nodes listed unresponsive; $lost requests lost whole over all runs)"
