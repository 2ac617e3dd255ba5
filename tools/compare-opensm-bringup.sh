#!/usr/bin/env bash
# Side by side against OpenSM 3.3.23 on the same ibsim fabric: time from start to SUBNET UP,
# SMPs sent, routing time. Each SM gets a freshly started ibsim (no LIDs, every port INIT).
#
#   tools/compare-opensm-bringup.sh [ENGINE]          # default fabric set, ENGINE default minhop
#   FABRICS="a.net b.net" tools/compare-opensm-bringup.sh ftree
#
# RUNS (default 5) runs of each SM per fabric, each on a fresh ibsim; the table shows the
# medians (start-up under the shim varies by several ms from run to run).
# Prints a markdown table. Start, for both SMs, = the exec of the SM's binary (stamped by
# the shell that execs it). OpenSM: up = its "SUBNET UP" line, SMPs = the activity count its
# SMInfo reports (OpenSM counts QP0 MADs sent there), routing = "Entering MASTER state" to
# "<engine> tables configured" (an upper bound: that span also holds LID assignment), sweep
# = "Setting IS_SM" (its ports bound, the first SMP next) to SUBNET UP. ibsm: up = its
# "SUBNET UP" log line, sweep = first SMP to subnet up; SMPs and routing time from its JSON
# report (routing timed around the routing call alone). Start to SUBNET UP holds the
# libumad2sim shim's start-up (connecting to ibsim, writing its fake sysfs into the working
# directory), which both SMs pay: 2-3 ms per process on tmpfs, 10-12 ms on a disk; the
# scratch directory is on /dev/shm unless SCRATCH names another.
# Needs ibsim-utils libumad2sim0 infiniband-diags opensm and a release build
# (cargo build --release -p sm-daemon). Runs every fabric in its own network namespace.
set -euo pipefail

SHIM=${SHIM:-/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so}
ENGINE=${ENGINE:-${1:-minhop}}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
IBSM=${IBSM:-$here/target/release/ibsm}
die() { echo "compare-opensm-bringup: $*" >&2; exit 1; }

if [[ ${INNER:-} != 1 ]]; then
    [[ -x $IBSM ]] || die "no $IBSM (cargo build --release -p sm-daemon, or set IBSM)"
    for t in ibsim opensm sminfo smpquery unshare timeout python3; do
        command -v "$t" >/dev/null || die "missing $t (apt-get install ibsim-utils libumad2sim0 infiniband-diags opensm)"
    done
    # The shim writes a fake sysfs (about a hundred files) into the working directory of
    # every process it serves and removes it at exit: on a disk that costs each SM 10-12 ms
    # of its start, on tmpfs 2-3 ms. Neither SM has that cost on a real HCA, so both run
    # from tmpfs when there is one (SCRATCH=/tmp to measure on disk).
    scratch=${SCRATCH:-/dev/shm}
    [[ -d $scratch && -w $scratch ]] || scratch=${TMPDIR:-/tmp}
    work=$(mktemp -d "$scratch/compare-osm.XXXXXX")
    if [[ -z ${FABRICS:-} ]]; then
        ex=/usr/share/doc/ibsim-utils/net-examples
        cp "$ex/net.2sw2path4hca" "$ex/net" "$work/"
        "$IBSM" gen fat-tree --levels 2 --radix 12 -o "$work/ft2-r12.net" 2>/dev/null
        "$IBSM" gen fat-tree --levels 3 --radix 8 -o "$work/ft3-r8.net" 2>/dev/null
        "$IBSM" gen torus --dims 4x4x4 --hosts 2 -o "$work/torus-4x4x4.net" 2>/dev/null
        "$IBSM" gen fat-tree --levels 3 --radix 36 --pods 8 -o "$work/ft3-r36-p8.net" 2>/dev/null
        FABRICS="$work/net.2sw2path4hca $work/net $work/ft2-r12.net $work/ft3-r8.net $work/torus-4x4x4.net $work/ft3-r36-p8.net"
    fi
    echo "| fabric | nodes | engine | OpenSM start to SUBNET UP | ibsm start to SUBNET UP | OpenSM / ibsm | OpenSM sweep | ibsm sweep | OpenSM / ibsm | OpenSM SMPs | ibsm SMPs | OpenSM routing (upper bound) | ibsm routing |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    for net in $FABRICS; do
        INNER=1 NET=$net WORK=$work ENGINE=$ENGINE IBSM=$IBSM SHIM=$SHIM \
            timeout --kill-after=10 1800 unshare -n "$0" || echo "| $(basename "$net") | failed (logs in $work) |"
    done
    [[ -n ${KEEP:-} ]] && echo "logs: $work" >&2 || rm -rf "$work"
    exit 0
fi

# Inside the namespace: one fabric, OpenSM then ibsm, each on a fresh ibsim.
ip link set lo up
name=$(basename "$NET")
dir=$WORK/$name.d
mkdir -p "$dir"
cd "$dir"
flags=$(awk '/^Switch/ {s++; p += $2 + 1} /^(Ca|Hca|Rt)/ {c++; p += $2}
    END {n = s + c; printf "-N %d -S %d -P %d %d", (n > 2048 ? n : 2048), (s > 256 ? s : 256), (p + 1 > 13312 ? p + 1 : 13312), n}' "$NET")
nodes=${flags##* }
flags=${flags% *}
start_ibsim() {
    # shellcheck disable=SC2086
    ibsim -s "$NET" --no-console $flags > "ibsim.$1.log" 2>&1 &
    sim=$!
    for _ in $(seq 1 1200); do
        kill -0 $sim 2>/dev/null || die "ibsim exited: $(tail -3 "ibsim.$1.log")"
        LD_PRELOAD=$SHIM timeout 10 smpquery -D nodeinfo 0 > /dev/null 2>&1 && return 0
        sleep 0.1
    done
    die "ibsim did not come up"
}
stop_ibsim() { kill $sim 2>/dev/null || true; wait $sim 2>/dev/null || true; }
trap stop_ibsim EXIT

runs=${RUNS:-5}
for run in $(seq 1 "$runs"); do
    # OpenSM.
    start_ibsim osm
    rm -rf osm && mkdir -p osm
    # Start = the moment the SM's binary is executed (stamped by the shell that execs it), so
    # neither SM is charged for the watchdog's or the shell's own start.
    LD_PRELOAD=$SHIM OSM_TMP_DIR=$dir/osm OSM_CACHE_DIR=$dir/osm \
        timeout 900 bash -c 'echo "$EPOCHREALTIME" > t0.osm; exec "$@"' opensm opensm -f "$dir/osm/osm.log" -R "$ENGINE" -D 0x43 -d 2 --dump_files_dir "$dir/osm" \
        > /dev/null 2>&1 &
    osm=$!
    for _ in $(seq 1 9000); do
        grep -q "SUBNET UP" osm/osm.log 2>/dev/null && break
        kill -0 $osm 2>/dev/null || break
        sleep 0.1
    done
    act=$(LD_PRELOAD=$SHIM timeout 20 sminfo 2>/dev/null | sed -n 's/.*activity count \([0-9]*\).*/\1/p' || true)
    kill $osm 2>/dev/null || true
    wait $osm 2>/dev/null || true
    stop_ibsim

    # ibsm.
    start_ibsim ibsm
    LD_PRELOAD=$SHIM timeout 900 bash -c 'echo "$EPOCHREALTIME" > t0.ibsm; exec "$@"' ibsm "$IBSM" run --umad --once --report json --routing "$ENGINE" \
        > ibsm.json 2> ibsm.log || true
    stop_ibsim

    python3 - "${act:-0}" "$(cat t0.ibsm)" "$(cat t0.osm)" >> runs.txt <<'PY'
import datetime, json, re, sys, time
act, t0_s, t_osm_s = sys.argv[1:4]
year = time.localtime().tm_year
def ts(line):
    # OpenSM stamps lines with local time to the microsecond, without the year.
    m = re.match(r"(\w+ +\d+ \d+:\d+:\d+) (\d+)", line)
    t = time.mktime(time.strptime(f"{year} {m.group(1)}", "%Y %b %d %H:%M:%S"))
    return t * 1e6 + int(m.group(2))
up = master = routed = bound = None
for line in open("osm/osm.log", errors="replace"):
    if not re.match(r"\w+ +\d+ \d+:\d+:\d+ \d+", line):
        continue
    if "Setting IS_SM" in line and bound is None:
        bound = ts(line)
    if "Entering MASTER state" in line and master is None:
        master = ts(line)
    if "tables configured" in line and routed is None:
        routed = ts(line)
    if "SUBNET UP" in line and up is None:
        up = ts(line)
try:
    r = json.load(open("ibsm.json"))
except Exception:
    r = {}
osm_ms = (up - float(t_osm_s) * 1e6) / 1e3 if up else -1
# ibsm: from the process start to its "SUBNET UP" log line.
ibsm_ms = -1
for line in open("ibsm.log", errors="replace"):
    line = re.sub(r"\x1b\[[0-9;]*m", "", line)
    if "SUBNET UP" in line:
        stamp = datetime.datetime.fromisoformat(line.split()[0].replace("Z", "+00:00"))
        ibsm_ms = (stamp.timestamp() - float(t0_s)) * 1e3
        break
osm_route = (routed - master) / 1e3 if routed and master else -1
osm_sweep = (up - bound) / 1e3 if up and bound else -1
print(osm_ms, ibsm_ms, r.get("sweep_ms", -1), act, r.get("mads_sent", -1), osm_route, r.get("routing_ms", -1), osm_sweep)
PY
done
trap - EXIT

python3 - "$name" "$nodes" "$ENGINE" runs.txt <<'PY'
import statistics, sys
name, nodes, engine, path = sys.argv[1:5]
rows = [list(map(float, l.split())) for l in open(path) if l.strip()]
def med(i):
    v = [r[i] for r in rows if r[i] >= 0]
    return statistics.median(v) if v else None
osm, ibsm, sweep, act, smps, osm_route, route, osm_sweep = (med(i) for i in range(8))
f = lambda v: f"{v:.1f} ms" if v is not None else "-"
n = lambda v: f"{v:.0f}" if v is not None else "-"
ratio = f"{osm / ibsm:.1f}x" if osm and ibsm else "-"
sweep_ratio = f"{osm_sweep / sweep:.1f}x" if osm_sweep and sweep else "-"
print(f"| {name} | {nodes} | {engine} | {f(osm)} | {f(ibsm)} | {ratio} | {f(osm_sweep)} | {f(sweep)} | {sweep_ratio} "
      f"| {n(act)} | {n(smps)} | {f(osm_route)} | {f(route)} |")
PY
