#!/usr/bin/env bash
# A flap storm in the simulated fabric: N switch-to-switch links drawn at random (seeded)
# from a topology file flap for 200 ms, each with its own period of 3-11 ms (down half of
# it), starting 20 s in, and the run goes on to 32 s (a light sweep at 30 s). The same
# fabric runs once without the storm; the storm passes if it ends with the same LIDs and
# the same forwarding tables as that calm run, and every repair (and heavy sweep, if one
# is needed: a repair the storm left unfinished, traps of a muted issuer) moved only the
# routes it had to move or bring back.
#
#   tools/flap-storm.sh ft3-36.net                      # 20 links, seed 1, minhop
#   N=20 SEED=3 ENGINE=updn tools/flap-storm.sh ft3-64-40.net
#   MATCH='pod 0$' tools/flap-storm.sh ft3-36.net       # the SM's own pod
#   CHECK=1 tools/flap-storm.sh ft3-16.net              # every CA pair traced after each repair
#   HEALTH=1 tools/flap-storm.sh ft3-36.net             # with the default [health] flap limit
#
# The default [health] link_flaps (5 within 60 s) takes most of the storm's links out of the
# subnet until an operator clears them, which is a policy and not a repair: the script turns
# it off (link_flaps = 0) unless HEALTH=1, when the tables are not compared (the links left
# out carry no routes) and the links left out are counted instead.
#
# The dumps are what is compared: at 40,960 hosts opensm-lfts.dump is about 12 GB a run.
# KEEP=DIR keeps the scenario, both runs' dumps and reports. IBSM names the binary (default:
# target/release/ibsm, else ibsm on PATH). Exit status 1 when the storm did not pass.
set -euo pipefail
[[ $# -ge 1 && -r $1 ]] || { echo "usage: $0 FABRIC.net" >&2; exit 2; }
net=$1 n=${N:-20} seed=${SEED:-1} match=${MATCH:-} engine=${ENGINE:-minhop}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
IBSM=${IBSM:-$here/target/release/ibsm}
[[ -x $IBSM ]] || IBSM=$(command -v ibsm) || { echo "no ibsm binary; build with cargo build --release" >&2; exit 2; }
scratch=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] && mkdir -p "$KEEP" && cp -r "$scratch"/. "$KEEP"; rm -rf "$scratch"' EXIT
check=--no-check
[[ -n ${CHECK:-} ]] && check=
config=()
if [[ -z ${HEALTH:-} ]]; then
    printf '[health]\nlink_flaps = 0\n' > "$scratch/ibsm.toml"
    config=(--config "$scratch/ibsm.toml")
fi

python3 - "$here/tools/lib" "$net" "$n" "$seed" "$match" > "$scratch/storm.scn" <<'PY'
import random, sys
sys.path.insert(0, sys.argv[1])
from importlib import import_module
links = import_module("switch-links").links
net, n, seed, match = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
found = links(net, "sw", match)
if len(found) < n:
    sys.exit(f"{net}: only {len(found)} such links")
random.seed(seed)
for name, port in random.sample(found, n):
    period = random.randint(3, 11)
    start = 20000 + random.randint(0, period - 1)
    print(f'at {start}ms flap "{name}"[{port}] period {period}ms count {200 // period}')
PY

run() {
    "$IBSM" run --sim "$net" --routing "$engine" --run-for 32s $check --report json \
        "${config[@]}" --state-dir "$scratch/$1.state" --dump-dir "$scratch/$1" "${@:2}" \
        2>"$scratch/$1.log" > "$scratch/$1.json" \
        || { tail -3 "$scratch/$1.log" >&2; exit 1; }
}
run calm
run storm --scenario "$scratch/storm.scn"

python3 - "$scratch" "$n" "$engine" "${HEALTH:-}" <<'PY'
import filecmp, json, sys
d, n, engine, health = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
sweeps = json.load(open(f"{d}/storm.json"))[1:]
same = {f: filecmp.cmp(f"{d}/calm/{f}", f"{d}/storm/{f}", shallow=False)
        for f in ("guid2lid", "opensm-lfts.dump")}
heavy = [s for s in sweeps if s["heavy"]]
# A repair or sweep moves what had to move (a loss) or what goes back (a return), nothing else.
wrong = [s for s in sweeps
         if s["lft_entries_moved"] != s["lft_entries_moved_min"] + s["lft_entries_restored"]]
unreachable = [s["unreachable_pairs"] for s in sweeps if s["unreachable_pairs"] is not None]
print(f"{n} links flapping for 200 ms, {engine}: {len(sweeps) - len(heavy)} repairs, {len(heavy)} heavy sweeps "
      f"({', '.join(s['trigger'] for s in heavy) or 'none'}), {sum(s['mads_sent'] for s in sweeps)} SMPs, "
      f"{sum(s['mads_lost'] for s in sweeps)} lost, slowest recovery "
      f"{max((s['recovery_ms'] or 0 for s in sweeps), default=0):.1f} ms")
print(f"entries moved {sum(s['lft_entries_moved'] for s in sweeps)}: had to {sum(s['lft_entries_moved_min'] for s in sweeps)}, "
      f"went back {sum(s['lft_entries_restored'] for s in sweeps)}; sweeps moving anything else: {len(wrong)}")
if unreachable:
    print(f"unreachable pairs after each sweep: max {max(unreachable)} (links still flapping), after the last {unreachable[-1]}")
unhealthy = {(p["node"], p["port"]) for s in sweeps for p in s["unhealthy_ports"]}
if health:
    print(f"ports left out as unhealthy: {len(unhealthy)}; forwarding tables not compared")
    same["opensm-lfts.dump"] = True
print(f"LIDs as in the calm run: {'yes' if same['guid2lid'] else 'NO'}"
      + ("" if health else f"; forwarding tables as in the calm run: {'yes' if same['opensm-lfts.dump'] else 'NO'}"))
ok = all(same.values()) and not wrong and (not unreachable or unreachable[-1] == 0)
print("passed" if ok else "FAILED")
sys.exit(0 if ok else 1)
PY
