#!/usr/bin/env bash
# Failover side by side: an ibsm master (priority 10) on Hca1 of an ibsim fabric and a standby
# (priority 1) on Hca2, ibsm or OpenSM; the master is stopped (SIGKILL: it answers nothing
# from then on) and the time until the standby's SUBNET UP is measured. Both standbys poll
# the master with the same settings: POLL_MS (default 1000) between polls, POLL_RETRIES
# (default 2) missed polls before taking over (OpenSM: sminfo_polling_timeout and
# polling_retry_number).
#
#   tools/compare-opensm-failover.sh [NET]       # default: ibsim's net.2sw2path4hca
#   RUNS=5 tools/compare-opensm-failover.sh      # median of RUNS (default 5)
#
# Prints a markdown table: detection (kill to the standby's first sign: ibsm "master lost",
# OpenSM "Entering DISCOVERING state"), takeover (kill to SUBNET UP) and LIDs kept.
# Needs root, ibsim-utils libumad2sim0 infiniband-diags opensm and a release build.
set -euo pipefail

die() { echo "compare-opensm-failover: $*" >&2; exit 1; }
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=lib/sm-in-ibsim.sh
source "$here/tools/lib/sm-in-ibsim.sh"

if [[ ${1:-} != --inner ]]; then
    find_ibsm "$here"
    need ibsim opensm ibnetdiscover unshare timeout python3
    NET=$(realpath "${1:-/usr/share/doc/ibsim-utils/net-examples/net.2sw2path4hca}")
    [[ -r $NET ]] || die "no fabric file $NET"
    echo "| standby | poll | detection (median) | takeover to SUBNET UP (median) | runs | LIDs kept |"
    echo "|---|---|---|---|---|---|"
    for sm in ibsm opensm; do
        scratch=$(mktemp -d "${SCRATCH:-/dev/shm}/failover.XXXXXX")
        env SHIM="$SHIM" IBSM="$IBSM" NET="$NET" STANDBY=$sm RUNS="${RUNS:-5}" \
            POLL_MS="${POLL_MS:-1000}" POLL_RETRIES="${POLL_RETRIES:-2}" \
            timeout --kill-after=10 1800 unshare -n "$0" --inner "$scratch" \
            || echo "| $sm | failed (logs in $scratch) |"
        [[ -n ${KEEP_SCRATCH:-} ]] || rm -rf "$scratch"
    done
    exit 0
fi

# Inside the namespace.
cd "$2"
ip link set lo up
stamp() { date +%s.%N; }
# The log line's time, as seconds since the epoch (ibsm: RFC 3339 UTC; OpenSM: local time).
line_time() {
    python3 - "$1" "$2" <<'PY'
import datetime, re, sys, time
path, what = sys.argv[1:3]
for line in open(path, errors="replace"):
    line = re.sub(r"\x1b\[[0-9;]*m", "", line)
    if what not in line:
        continue
    m = re.match(r"(\d{4}-\d\d-\d\dT[\d:.]+)Z", line)
    if m:
        print(datetime.datetime.fromisoformat(m.group(1) + "+00:00").timestamp())
        break
    m = re.match(r"(\w+ +\d+ \d+:\d+:\d+) (\d+)", line)
    if m:
        t = time.mktime(time.strptime(f"{time.localtime().tm_year} {m.group(1)}", "%Y %b %d %H:%M:%S"))
        print(t + int(m.group(2)) / 1e6)
        break
PY
}
wait_for() { # FILE TEXT SECS
    local i
    for i in $(seq 1 $(($3 * 20))); do
        grep -q "$2" "$1" 2>/dev/null && return 0
        sleep 0.05
    done
    return 1
}
lids() { LD_PRELOAD=$SHIM SIM_HOST=Hca3 timeout 30 ibnetdiscover -p 2>/dev/null | awk '{print $2, $3, $4}' | sort; }

printf '[sm]\nstate_dir = "%s/state"\nsm_poll_interval_ms = %d\nsm_poll_retries = %d\n' \
    "$PWD" "$POLL_MS" "$POLL_RETRIES" > standby.toml
printf 'sminfo_polling_timeout %d\npolling_retry_number %d\n' "$POLL_MS" "$POLL_RETRIES" > opensm.conf

for run in $(seq 1 "$RUNS"); do
    rm -rf osm state; mkdir -p osm
    ibsim -s "$NET" --no-console > ibsim.log 2>&1 &
    sim=$!
    for _ in $(seq 1 100); do LD_PRELOAD=$SHIM smpquery -D nodeinfo 0 >/dev/null 2>&1 && break; sleep 0.1; done
    SIM_HOST=Hca1 LD_PRELOAD=$SHIM RUST_LOG=info NO_COLOR=1 "$IBSM" run --umad --priority 10 \
        > /dev/null 2> master.log &
    master=$!
    wait_for master.log "sweeping until" 30 || die "the master did not come up"
    if [[ $STANDBY == ibsm ]]; then
        SIM_HOST=Hca2 LD_PRELOAD=$SHIM RUST_LOG=info NO_COLOR=1 "$IBSM" run --umad --priority 1 \
            --config standby.toml > /dev/null 2> standby.log &
        standby=$!
        wait_for standby.log "entering STANDBY state" 30 || die "no ibsm standby"
        seen="master lost"; log=standby.log
    else
        SIM_HOST=Hca2 LD_PRELOAD=$SHIM OSM_TMP_DIR=$PWD/osm OSM_CACHE_DIR=$PWD/osm \
            opensm -F opensm.conf -f "$PWD/osm/osm.log" -p 1 -d 2 > /dev/null 2>&1 &
        standby=$!
        wait_for osm/osm.log "Entering STANDBY state" 30 || die "no OpenSM standby"
        seen="Entering DISCOVERING state"; log=osm/osm.log
        # The first "Entering DISCOVERING" was its start: count the next one.
        cp osm/osm.log osm/before.log
    fi
    sleep 0.5
    before=$(lids)
    t0=$(stamp)
    kill -KILL $master; wait $master 2>/dev/null || true
    wait_for "$log" "SUBNET UP" 60 || die "the standby never took over"
    if [[ $STANDBY == opensm ]]; then
        # Only what came after the kill.
        tail -n +"$(($(wc -l < osm/before.log) + 1))" osm/osm.log > osm/after.log
        log=osm/after.log
    fi
    wait_for "$log" "SUBNET UP" 60 || die "the standby never took over"
    sleep 0.5
    after=$(lids)
    td=$(line_time "$log" "$seen")
    tu=$(line_time "$log" "SUBNET UP")
    kept=$([[ "$before" == "$after" ]] && echo yes || echo no)
    echo "$t0 ${td:-0} ${tu:-0} $kept" >> runs.txt
    kill $standby 2>/dev/null; wait $standby 2>/dev/null || true
    kill $sim; wait $sim 2>/dev/null || true
done

python3 - "$STANDBY" "$POLL_MS" "$POLL_RETRIES" runs.txt <<'PY'
import statistics, sys
sm, poll, retries, path = sys.argv[1:5]
rows = [l.split() for l in open(path) if l.strip()]
det = [(float(r[1]) - float(r[0])) * 1e3 for r in rows if float(r[1]) > 0]
up = [(float(r[2]) - float(r[0])) * 1e3 for r in rows if float(r[2]) > 0]
kept = "yes" if all(r[3] == "yes" for r in rows) else "no (" + ", ".join(r[3] for r in rows) + ")"
f = lambda v: f"{statistics.median(v):.0f} ms ({min(v):.0f}-{max(v):.0f})" if v else "-"
print(f"| {sm} | {poll} ms x {retries} | {f(det)} | {f(up)} | {len(rows)} | {kept} |")
PY
