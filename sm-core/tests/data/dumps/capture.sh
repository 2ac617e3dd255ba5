#!/usr/bin/env bash
# Captures OpenSM's dump files and the diags' view of the same fabric, for the dump-format
# tests. Usage (as root, from anywhere):
#   capture.sh OUTDIR NETFILE ROUTING LMC [UNLINK]
# e.g. capture.sh 2sw2path4hca2port /usr/share/doc/ibsim-utils/net-examples/net.2sw2path4hca2port minhop 0
# UNLINK, if given, is an ibsim console link spec such as '"H6"[1]': after the tables are
# captured the link is cut and ibnetdiscover / ibroute are captured again (*-unlinked.txt).
# Everything runs in a private network namespace (ibsim's sockets are per namespace),
# from a scratch directory (the shim writes ./sys-<pid>/ there), every tool under timeout.
set -euo pipefail
if [ "${IBSM_IN_NS:-}" != 1 ]; then
    exec env IBSM_IN_NS=1 unshare -n "$0" "$@"
fi
out=$(realpath -m "$1"); net=$(realpath "$2"); routing=$3; lmc=$4; unlink=${5:-}
SHIM=/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so
scratch=$(mktemp -d)
trap 'kill %1 2>/dev/null || true; rm -rf "$scratch"' EXIT
cd "$scratch"
mkdir -p osm "$out"
ip link set lo up
mkfifo console
# A FIFO kept open by fd 3 feeds ibsim's console (EOF on stdin would make it spin).
timeout 120 ibsim -s "$net" < console > ibsim.log 2>&1 &
exec 3> console
sleep 1
diag() { LD_PRELOAD=$SHIM timeout 30 "$@" 2>/dev/null; }
LD_PRELOAD=$SHIM OSM_TMP_DIR=$scratch/osm OSM_CACHE_DIR=$scratch/osm timeout 60 \
    opensm -o -f "$scratch/osm/osm.log" -R "$routing" -l "$lmc" -d 2 \
    --dump_files_dir "$scratch/osm" -D 0x41 > osm.out 2>&1
for f in opensm-lfts.dump opensm-subnet.lst opensm.fdbs guid2lid; do
    cp "osm/$f" "$out/$f"
done
tables() {
    diag ibnetdiscover > "$out/ibnetdiscover$1.txt"
    # Every switch LID, in ibnetdiscover's order; ibroute runs once per switch and the
    # outputs are concatenated, as a user would do.
    : > "$out/ibroute$1.txt"
    for lid in $(sed -n 's/^Switch.* base port 0 lid \([0-9]*\) .*/\1/p' "$out/ibnetdiscover$1.txt"); do
        diag ibroute "$lid" >> "$out/ibroute$1.txt"
    done
}
tables ""
first=$(sed -n 's/^Switch.* base port 0 lid \([0-9]*\) .*/\1/p' "$out/ibnetdiscover.txt" | head -1)
diag ibroute -a "$first" > "$out/ibroute-all.txt"
diag ibroute -n "$first" > "$out/ibroute-brief.txt"
if [ -n "$unlink" ]; then
    echo "Unlink $unlink" >&3
    sleep 1
    tables "-unlinked"
fi
echo "Quit" >&3
exec 3>&-
wait %1 || true
