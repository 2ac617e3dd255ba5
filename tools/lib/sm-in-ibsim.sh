# Shared by the tools that run one SM (ibsm or OpenSM) at a time in its own network
# namespace with its own ibsim, and clients on another host. Source it; it defines:
#
#   find_ibsm HERE          sets IBSM (IBSM, HERE/target/release/ibsm, .../debug/ibsm, PATH)
#   need TOOL...            dies with an install hint when a tool or the shim is missing
#   per_sm NAME SMS VAR=... runs "$0 --inner SCRATCH" once per SM in a new namespace, with
#                           SM and the VAR=... settings in its environment, for at most
#                           SM_TIMEOUT seconds (default 1800); the scratch directory is
#                           removed unless the run failed or KEEP_SCRATCH is set
#   start_sm LOG_LEVEL      (inside the namespace, in the scratch directory) starts ibsim on
#                           NET, sized for it (ibsim_limits), waits for it, starts SM on
#                           SIM_HOST (default Hca1); defines t() (a diag run on CLIENT, default
#                           Hca2, under the shim, with the timeout given first) and stops both
#                           on exit. With SIM_CONSOLE set, ibsim reads console commands from
#                           the fifo ./console, which sim_cmd writes to
#   sim_cmd LINE            one console command to ibsim (Unlink "sw"[3], ReLink "sw"[3], ...);
#                           nothing acknowledges it: ibsim answers errors in ibsim.log
#   ibsim_limits NET        the -N -S -P flags NET needs (never below ibsim's defaults)
#
# Scripts set `die` before sourcing. Needs ibsim-utils libumad2sim0 infiniband-diags opensm.

SHIM=${SHIM:-/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so}

find_ibsm() {
    local here=$1 c
    if [[ -z ${IBSM:-} ]]; then
        for c in "$here/target/release/ibsm" "$here/target/debug/ibsm" "$(command -v ibsm || true)"; do
            [[ -n $c && -x $c ]] && { IBSM=$c; break; }
        done
    fi
    [[ -n ${IBSM:-} && -x $IBSM ]] || die "no ibsm binary (cargo build --release -p sm-daemon, or set IBSM)"
    IBSM=$(realpath "$IBSM")
}

need() {
    local t
    for t in "$@"; do
        command -v "$t" >/dev/null || die "missing $t (apt-get install ibsim-utils libumad2sim0 infiniband-diags opensm)"
    done
    [[ -r $SHIM ]] || die "missing $SHIM (apt-get install libumad2sim0)"
}

per_sm() {
    local name=$1 sms=$2 sm scratch rc
    shift 2
    for sm in $sms; do
        scratch=$(mktemp -d "${TMPDIR:-/tmp}/$name.XXXXXX")
        rc=0
        env SHIM="$SHIM" IBSM="$IBSM" SM="$sm" "$@" \
            timeout --kill-after=10 "${SM_TIMEOUT:-1800}" unshare -n "$0" --inner "$scratch" || rc=$?
        if [[ $rc -ne 0 || -n ${KEEP_SCRATCH:-} ]]; then
            echo "$name: $sm logs kept in $scratch" >&2
        else
            rm -rf "$scratch"
        fi
        [[ $rc -eq 0 ]] || exit $rc
    done
}

ibsim_limits() {
    awk '/^Switch/ {s++; p += $2 + 1} /^(Ca|Hca|Rt)/ {c++; p += $2}
        END {n = s + c; printf "-N %d -S %d -P %d", (n > 2048 ? n : 2048), (s > 256 ? s : 256), (p + 1 > 13312 ? p + 1 : 13312)}' "$1"
}

start_sm() {
    local level=$1 limits
    ip link set lo up
    limits=$(ibsim_limits "$NET")
    if [[ -n ${SIM_CONSOLE:-} ]]; then
        # Held open both ways on fd 9: ibsim never reads an end of file, sim_cmd writes.
        rm -f console
        mkfifo console
        exec 9<> console
        # shellcheck disable=SC2086
        ibsim -s "$NET" $limits < console > ibsim.log 2>&1 &
    else
        # shellcheck disable=SC2086
        ibsim -s "$NET" --no-console $limits > ibsim.log 2>&1 &
    fi
    sim=$!
    smpid=
    trap 'stop_sm' EXIT
    host=${SIM_HOST:-Hca1}
    client=${CLIENT:-Hca2}
    local _
    for _ in $(seq 1 200); do
        t 20 smpquery -D nodeinfo 0 >/dev/null 2>&1 && break
        sleep 0.05
    done
    if [[ $SM == ibsm ]]; then
        SIM_HOST=$host LD_PRELOAD=$SHIM RUST_LOG=$level NO_COLOR=1 "$IBSM" run --umad > sm.log 2>&1 &
        smpid=$!
    else
        mkdir -p osm
        # -d 2: the log is flushed line by line, so that it can be read while OpenSM runs.
        SIM_HOST=$host LD_PRELOAD=$SHIM OSM_TMP_DIR=$PWD/osm OSM_CACHE_DIR=$PWD/osm \
            opensm -f "$PWD/osm/osm.log" -d 2 > sm.log 2>&1 &
        smpid=$!
    fi
}

stop_sm() {
    [[ -n ${smpid:-} ]] && { kill "$smpid" 2>/dev/null; wait "$smpid" 2>/dev/null || true; }
    kill "$sim" 2>/dev/null
    wait "$sim" 2>/dev/null || true
    [[ -z ${SIM_CONSOLE:-} ]] || exec 9>&-
}

sim_cmd() { printf '%s\n' "$*" >&9; }

t() { local secs=$1; shift; SIM_HOST=$client LD_PRELOAD=$SHIM timeout "$secs" "$@"; }
