#!/usr/bin/env bash
# Runs OpenSM once with QoS on an ibsim fabric and prints the SL-to-VL and VL arbitration
# tables it programmed, as smpquery shows them. Usage (as root):
#   capture.sh NETFILE OPENSM_OPTIONS_FILE > EXPECTED
# Sections start with `## end GUID` (CA ports, by LID from OpenSM's guid2lid) or
# `## switch GUID PORT` (every external port of every switch). Everything runs in a private
# network namespace from a scratch directory, every tool under timeout (REFERENCE.md §2, §5).
set -euo pipefail
if [ "${IBSM_IN_NS:-}" != 1 ]; then
    exec env IBSM_IN_NS=1 unshare -n "$0" "$@"
fi
net=$(realpath "$1"); opts=$(realpath "$2")
SHIM=/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so
scratch=$(mktemp -d)
trap 'kill %1 2>/dev/null || true; rm -rf "$scratch"' EXIT
cd "$scratch"
mkdir osm
ip link set lo up
timeout 120 ibsim -s "$net" --no-console > ibsim.log 2>&1 &
sleep 1
diag() { LD_PRELOAD=$SHIM timeout 10 "$@" 2>/dev/null; }
LD_PRELOAD=$SHIM OSM_TMP_DIR=$scratch/osm OSM_CACHE_DIR=$scratch/osm timeout 60 \
    opensm -o -Q -F "$opts" -f "$scratch/osm/osm.log" -d 2 \
    --dump_files_dir "$scratch/osm" > osm.out 2>&1
diag ibnetdiscover > topo.txt
switches=$(sed -n 's/^Switch\t*\([0-9]*\) "S-\([0-9a-f]*\)".* lid \([0-9]*\) .*/\2 \1 \3/p' topo.txt)
while read -r guid lid _; do
    [ -n "$guid" ] || continue
    # Switch port 0 is a base port 0 on ibsim: OpenSM gives it no QoS tables.
    if grep -q "^0x0*${guid#0x} " <<< "$(sed 's/^/0x/' <<< "$switches")"; then continue; fi
    echo "## end $guid"
    diag smpquery sl2vl $((lid))
    diag smpquery vlarb $((lid))
done < osm/guid2lid
while read -r guid ports lid; do
    for p in $(seq 1 "$ports"); do
        echo "## switch 0x$guid $p"
        diag smpquery sl2vl "$lid" "$p"
        diag smpquery vlarb "$lid" "$p"
    done
done <<< "$switches"
