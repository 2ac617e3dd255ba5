#!/usr/bin/env bash
# Repairs of many links, one after the other, in the simulated fabric: N links drawn at
# random (seeded) from a topology file go down and come back 0.5 s later, one a second;
# prints how the repairs went: SMPs over LFT blocks per repair (the issue's bound is 20),
# moved against moved_min, heavy sweeps, the slowest recovery.
#
#   tools/repair-sweep.sh ft3-36.net                 # 30 switch-to-switch links, seed 1
#   N=20 SEED=5 KIND=ca tools/repair-sweep.sh ft3-64-40.net
#   MATCH='pod 0$' tools/repair-sweep.sh ft3-36.net  # links of switches named "... pod 0"
#
# KIND: sw (switch-to-switch links, default) or ca (switch-to-host). MATCH: a regular
# expression the near switch's description must match. ENGINE (default minhop) is the
# routing chain. IBSM names the binary (default: target/release/ibsm, else ibsm on PATH).
set -euo pipefail
[[ $# -ge 1 && -r $1 ]] || { echo "usage: $0 FABRIC.net" >&2; exit 2; }
net=$1 n=${N:-30} seed=${SEED:-1} kind=${KIND:-sw} match=${MATCH:-} engine=${ENGINE:-minhop}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
IBSM=${IBSM:-$here/target/release/ibsm}
[[ -x $IBSM ]] || IBSM=$(command -v ibsm) || { echo "no ibsm binary; build with cargo build --release" >&2; exit 2; }
scratch=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] && cp "$scratch/report.json" "$KEEP"; rm -rf "$scratch"' EXIT

python3 - "$here/tools/lib" "$net" "$n" "$seed" "$kind" "$match" > "$scratch/links.scn" <<'PY'
import random, sys
sys.path.insert(0, sys.argv[1])
from importlib import import_module
links = import_module("switch-links").links
net, n, seed, kind, match = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6]
found = links(net, kind, match)
if len(found) < n:
    sys.exit(f"{net}: only {len(found)} such links")
random.seed(seed)
for i, (name, port) in enumerate(random.sample(found, n)):
    print(f'at {20 + i}s link-down "{name}"[{port}]')
    print(f'at {20 + i}.5s link-up "{name}"[{port}]')
PY
"$IBSM" run --sim "$net" --routing "$engine" --scenario "$scratch/links.scn" --run-for "$((20 + n))s" \
    --no-check --report json 2>"$scratch/log" > "$scratch/report.json" \
    || { tail -3 "$scratch/log" >&2; exit 1; }
python3 - "$scratch/report.json" "$n" "$kind" "$engine" <<'PY'
import collections, json, sys
sweeps, n, kind, engine = json.load(open(sys.argv[1]))[1:], sys.argv[2], sys.argv[3], sys.argv[4]
over = [s["mads_sent"] - s["lft_blocks_sent"] for s in sweeps]
local = [s for s in sweeps if s["reroute"] == "only the broken routes"]
whole = [s for s in sweeps if s not in local]
# A local repair moves what had to move (a loss) or what goes back (a return), nothing else.
wrong = sum(1 for s in local if s["lft_entries_moved"] != s["lft_entries_moved_min"] + s["lft_entries_restored"])
print(f"{n} {kind} links down and up, {engine}: {len(sweeps)} repairs, {sum(s['heavy'] for s in sweeps)} heavy sweeps, "
      f"slowest recovery {max(s['recovery_ms'] or 0 for s in sweeps):.1f} ms")
print(f"local repairs: {len(local)}, moving more than the broken or returning routes: {wrong}")
if whole:
    print(f"routes computed whole: {len(whole)} ({whole[0]['reroute'][:70]}...), entries moved "
          f"{sum(s['lft_entries_moved'] for s in whole)} where {sum(s['lft_entries_moved_min'] for s in whole)} had to")
if engine == "layered":
    print(f"paths given another SL: {sum(s.get('paths_new_sl', 0) for s in local)}, exposed "
          f"(their hosts' SL could close a credit loop until they ask again): "
          f"{sum(s.get('paths_exposed', 0) for s in local)}; repairs keeping every SL: "
          f"{sum(1 for s in local if s.get('paths_new_sl', 0) == 0)} of {len(local)}")
print("SMPs over LFT blocks: max", max(over), "| count per value:",
      ", ".join(f"+{k}: {v}" for k, v in sorted(collections.Counter(over).items())))
for s, o in zip(sweeps, over):
    if o > 20:
        print(f"  +{o}: {s['trigger'][:100]} ({s['lft_blocks_sent']} blocks)")
PY
