#!/usr/bin/env bash
# Runs OpenSM once on an ibsim fabric with a partitions file and prints the P_Key tables it
# programmed, as read back with smpquery. Usage (as root):
#   capture.sh NETFILE PARTITIONS [OPENSM_OPTIONS_FILE] > EXPECTED
# PARTITIONS may name a file that does not exist (OpenSM's no-file behaviour).
# Output: `end GUID: keys` for every end port (CA ports by port GUID, switch port 0 by
# switch GUID), `switch GUID PORT: keys` for every switch port; trailing empty entries
# dropped. Everything runs in a private network namespace from a scratch directory, every
# tool under timeout (REFERENCE.md §2, §5).
set -euo pipefail
if [ "${IBSM_IN_NS:-}" != 1 ]; then
    exec env IBSM_IN_NS=1 unshare -n "$0" "$@"
fi
net=$(realpath "$1"); parts=$(realpath -m "$2"); opts=${3:+$(realpath "$3")}
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
    opensm -o -f "$scratch/osm/osm.log" -P "$parts" ${opts:+-F "$opts"} -d 2 \
    --dump_files_dir "$scratch/osm" > osm.out 2>&1
# smpquery prints 8 keys per line after an index; join them and drop trailing zeros.
keys() { diag smpquery pkeys "$@" | awk '/^ *[0-9]+:/ { for (i = 2; i <= NF; i++) k[n++] = $i }
    END { last = -1; for (i = 0; i < n; i++) if (k[i] != "0x0000") last = i;
          s = ""; for (i = 0; i <= last; i++) s = s " " k[i]; print s }'; }
diag ibnetdiscover > topo.txt
while read -r guid lid _; do
    [ -n "$guid" ] || continue
    echo "end $guid:$(keys $((lid)))"
done < osm/guid2lid | sort
# Every port of every switch, by the switch's LID.
sed -n 's/^Switch\t*\([0-9]*\) "S-\([0-9a-f]*\)".* lid \([0-9]*\) .*/\2 \1 \3/p' topo.txt |
while read -r guid ports lid; do
    for p in $(seq 1 "$ports"); do
        echo "switch 0x$guid $p:$(keys "$lid" "$p")"
    done
done | sort
