#!/usr/bin/env bash
# Recovery side by side: how long the SM takes to repair the fabric after a link between two
# switches goes down, and after it comes back, ibsm (`ibsm run --umad`) against OpenSM 3.3.23,
# on the same ibsim fabric and the same link.
#
#   tools/compare-opensm-recovery.sh [NET]             # default: ibsm gen fat-tree --levels 2 --radix 8
#   RUNS=1 tools/compare-opensm-recovery.sh big.net    # RUNS (default 3) runs per SM; medians
#   LINK='"S-0002000100000001"[5]' tools/compare-opensm-recovery.sh ft.net
#   WHOLE=1 LINK='"S-0002000200000021"[1]' tools/compare-opensm-recovery.sh ft.net  # the switch
#
# Each run, for each SM (SMS, default "ibsm opensm"), in its own network namespace: a fresh
# ibsim on NET with its console open, the SM master on the fabric's first CA (SIM_HOST),
# diags on the second (CLIENT). Once the SM is up (its "SUBNET UP") and its log is quiet:
#   1. `ibnetdiscover -p` gives the LIDs of PAIRS (default 8) host pairs, picked by port GUID:
#      half from hosts on the link's switches to hosts that the link's first switch reaches
#      over it (from its LFT, `ibroute`: they cross the link before the event, whatever
#      routes the SM chose), half spread over the fabric (the same hosts for both SMs); each
#      pair is traced;
#   2. `Unlink LINK` on ibsim's console (the time taken just before the write), then the wait
#      for the SM's first line saying it is done: ibsm "repaired" (or "SUBNET UP", a heavy
#      sweep), OpenSM "SUBNET UP" (its heavy sweep); then until the log has been quiet for
#      SETTLE seconds (default 2) or as long as the first repair took, whichever is longer,
#      so that a second repair or sweep the event caused is seen and counted; every pair is
#      traced again;
#   3. the same for `ReLink LINK`.
# WHOLE (unset by default): `Unlink` and `ReLink` the link's first switch whole (every
# link; ibsim keeps its tables, so it comes back as it was, dark meanwhile); the pairs and
# the port state are still the link's.
# LINK defaults to the first link from a leaf (a switch with CAs) that does not hold
# SIM_HOST to another switch, in the order of the fabric file.
#
# Prints a markdown table, one row per SM and event: done after = console write to the
# first "done" line (log time stamps: ibsm RFC 3339 UTC, OpenSM local time to the
# microsecond), median (min-max); the SM's own figure = ibsm's recovery_ms (trap arrival to
# the last Set acknowledged) with its SMPs and LFT blocks from the same line, OpenSM's time
# from the trap in its log ("Received Generic Notice") to SUBNET UP; SMPs = the activity
# count its SMInfo reports (both SMs count there what they send on QP0: SMPs, trap
# represses, their answers to sminfo) after the settling minus before the event, so a
# periodic light sweep in that window counts too; ibtracert ok =
# traces that reached their destination after the event, out of all, how many of them
# crossed the link before the event and after it, and the state of the link's port after it
# (`smpquery portinfo` LinkState: Down after Unlink, Active once the SM brought it back).
#
# UP_TIMEOUT (default 1800 s) bounds the bring-up, DONE_TIMEOUT (default 1800 s) each
# repair, SM_TIMEOUT (default 3600 s x RUNS) a whole SM. Scratch lives under SCRATCH
# (default /dev/shm) and is removed unless the run failed or KEEP_SCRATCH is set; a failed
# SM stops the script (its logs are kept and named). Needs
# root, ibsim-utils libumad2sim0 infiniband-diags opensm, and ibsm (a release build, or IBSM).
set -euo pipefail

die() { echo "compare-opensm-recovery: $*" >&2; exit 1; }
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=lib/sm-in-ibsim.sh
source "$here/tools/lib/sm-in-ibsim.sh"

if [[ ${1:-} != --inner ]]; then
    [[ $(id -u) -eq 0 ]] || die "needs root (unshare -n)"
    find_ibsm "$here"
    need ibsim opensm ibnetdiscover ibroute ibtracert sminfo smpquery mkfifo ip unshare timeout python3
    runs=${RUNS:-3}
    [[ $runs =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive number, not '$runs'"
    scratch=${SCRATCH:-/dev/shm}
    [[ -d $scratch && -w $scratch ]] || die "no writable scratch directory $scratch (set SCRATCH)"
    [[ ${PAIRS:-8} =~ ^[1-9][0-9]*$ ]] || die "PAIRS must be a positive number, not '$PAIRS'"
    [[ -z ${1:-} || -r $1 ]] || die "no fabric file $1"
    work=$(mktemp -d "$scratch/recovery.XXXXXX")
    if [[ -n ${1:-} ]]; then
        net=$(realpath "$1")
    else
        net=$work/ft2-r8.net
        "$IBSM" gen fat-tree --levels 2 --radix 8 -o "$net" 2>/dev/null || { rm -rf "$work"; die "ibsm gen failed"; }
    fi
    # The SM's host, the diags' host, the link and what ibsim calls its two ends' nodes.
    sel=$(python3 - "$net" "${SIM_HOST:-}" "${CLIENT:-}" "${LINK:-}" <<'PY'
import re, sys
path, host, client, link = sys.argv[1:5]
nodes = {}   # name -> (type, description, {port: (peer, peer port)})
order = []
cur = None
for line in open(path, errors="replace"):
    m = re.match(r'(Switch|Ca|Hca|Rt)\s+\d+\s+"([^"]+)"(.*)', line)
    if m:
        kind, name, rest = m.groups()
        # ibsim's node description: the comment's quoted text, else the name.
        desc = name
        c = rest.find("#")
        if c >= 0:
            d = rest[c + 1:].strip()
            if d.startswith('"') and '"' in d[1:]:
                desc = d[1:d.index('"', 1)]
            elif d:
                for cut in (" enhanced port ", " base port ", " lid ", " lmc "):
                    if cut in d:
                        d = d[:d.index(cut)]
                        break
                desc = d.strip() or name
        cur = name
        nodes[name] = ("sw" if kind == "Switch" else "ca", desc, {})
        order.append(name)
        continue
    m = re.match(r'\[(\d+)\][^"]*"([^"]+)"\s*\[(\d+)\]', line)
    if m and cur:
        nodes[cur][2][int(m.group(1))] = (m.group(2), int(m.group(3)))
cas = [n for n in order if nodes[n][0] == "ca"]
if len(cas) < 2:
    sys.exit("fewer than two CAs in the fabric file")
host = host or cas[0]
client = client or cas[1]
for n in (host, client):
    if n not in nodes:
        sys.exit(f'no node "{n}" in the fabric file')
sw = lambda n: n in nodes and nodes[n][0] == "sw"
if link:
    m = re.fullmatch(r'\s*"([^"]+)"\s*\[(\d+)\]\s*', link)
    if not m:
        sys.exit(f"LINK must look like '\"node\"[port]', not {link!r}")
    a, pa = m.group(1), int(m.group(2))
    if a not in nodes or pa not in nodes[a][2]:
        sys.exit(f"LINK {link}: no such linked port in the fabric file")
else:
    home = {p for (p, _) in nodes[host][2].values()}
    leaves = [n for n in order if sw(n) and any(not sw(p) for (p, _) in nodes[n][2].values())]
    cands = [n for n in leaves if n not in home] + [n for n in leaves if n in home] + [n for n in order if sw(n)]
    for a in cands:
        up = [q for q, (p, _) in sorted(nodes[a][2].items()) if sw(p) and p != a]
        if up:
            pa = up[0]
            break
    else:
        sys.exit("no link between two switches in the fabric file")
b, pb = nodes[a][2][pa]
print(host, client, f'"{a}"[{pa}]', f'"{b}"[{pb}]', pa, pb, sep="\t")
print(nodes[a][1], nodes[b][1] if b in nodes else b, sep="\t")
PY
    ) || { rm -rf "$work"; die "cannot pick the hosts and the link from $net"; }
    IFS=$'\t' read -r host client link peer port_a port_b <<< "$(sed -n 1p <<< "$sel")"
    IFS=$'\t' read -r desc_a desc_b <<< "$(sed -n 2p <<< "$sel")"
    nodes=$(grep -cE '^(Switch|Ca|Hca|Rt)[[:space:]]' "$net" || true)
    echo "$(basename "$net"): $nodes nodes; link $link - $peer; SM on $host, diags on $client;" \
        "${PAIRS:-8} traced pairs; $runs runs"
    echo
    echo "| SM | event | done after (median) | SM's own figure | SMPs | ibtracert ok | runs |"
    echo "|---|---|---|---|---|---|---|"
    SM_TIMEOUT=${SM_TIMEOUT:-$((3600 * runs))} TMPDIR=$work \
        per_sm recovery "${SMS:-ibsm opensm}" NET="$net" RUNS="$runs" SIM_CONSOLE=1 \
        SIM_HOST="$host" CLIENT="$client" LINK="$link" PORT_A="$port_a" PORT_B="$port_b" \
        DESC_A="$desc_a" DESC_B="$desc_b" PAIRS="${PAIRS:-8}" SETTLE="${SETTLE:-2}" WHOLE="${WHOLE:-}" \
        UP_TIMEOUT="${UP_TIMEOUT:-1800}" DONE_TIMEOUT="${DONE_TIMEOUT:-1800}"
    if [[ -n ${KEEP_SCRATCH:-} ]]; then
        echo "compare-opensm-recovery: files in $work" >&2
    else
        rm -rf "$work"
    fi
    exit 0
fi

# Inside the namespace: RUNS runs of one SM.
cd "$2"
top=$PWD
stamp() { date +%s.%N; }
if [[ $SM == ibsm ]]; then
    log=sm.log done_re='repaired|SUBNET UP'
else
    log=osm/osm.log done_re='SUBNET UP'
fi
alive() { kill -0 "$smpid" 2>/dev/null || die "$SM exited: $(tail -3 sm.log)"; }
# Until FILE has not changed for SECS seconds (at most LIMIT seconds).
quiet() {
    local file=$1 secs=$2 limit=$3 size last now start
    start=$(stamp)
    last=$start
    size=$(stat -c %s "$file")
    while :; do
        sleep 0.1
        now=$(stamp)
        if [[ $(stat -c %s "$file") != "$size" ]]; then
            size=$(stat -c %s "$file")
            last=$now
        fi
        awk -v n="$now" -v l="$last" -v s="$secs" 'BEGIN { exit !(n - l >= s) }' && return 0
        awk -v n="$now" -v b="$start" -v s="$limit" 'BEGIN { exit !(n - b >= s) }' && return 0
    done
}
activity() { t 60 sminfo 2>/dev/null | sed -n 's/.*activity count \([0-9]*\).*/\1/p'; }
# Every pair traced: "ok total via" (via: traces that crossed the link).
traces() {
    local tag=$1 s d n=0 ok=0 via=0
    while read -r s d; do
        n=$((n + 1))
        if t 60 ibtracert "$s" "$d" < /dev/null > "trace.$tag.$n.txt" 2>&1 \
            && grep -q '^To ' "trace.$tag.$n.txt"; then
            ok=$((ok + 1))
        fi
        if grep -qE "$(cat via.re)" "trace.$tag.$n.txt"; then via=$((via + 1)); fi
    done < pairs.txt
    echo "$ok $n $via"
}
# EVENT CONSOLE-COMMAND VIA-BEFORE: one event, one JSON line in runs.jsonl.
event() {
    local name=$1 cmd=$2 via0=$3 from a0 a1 n0 t0 t1 i settle traced state
    quiet "$log" 1 60
    a0=$(activity)
    from=$(wc -l < "$log")
    n0=$(grep -cE "$done_re" "$log" || true)
    local simfrom
    simfrom=$(wc -l < ibsim.log)
    t0=$(stamp)
    sim_cmd "$cmd"
    i=0
    until [[ $(grep -cE "$done_re" "$log" || true) -gt $n0 ]]; do
        sleep 0.05
        i=$((i + 1))
        if ((i % 20 == 0)); then
            alive
            if tail -n +"$((simfrom + 1))" ibsim.log | grep -qE '(^|> )# '; then
                die "ibsim refused '$cmd': $(tail -n +"$((simfrom + 1))" ibsim.log | grep -E '(^|> )# ' | head -1)"
            fi
        fi
        ((i < DONE_TIMEOUT * 20)) || die "$SM: nothing done ${DONE_TIMEOUT} s after '$cmd' ($(tail -2 "$log"))"
    done
    t1=$(stamp)
    # Settle: quiet for SETTLE s, or for as long as the first repair took if that is longer.
    settle=$(awk -v a="$t0" -v b="$t1" -v s="$SETTLE" 'BEGIN { d = b - a; printf "%.1f", (d > s ? d : s) }')
    quiet "$log" "$settle" "$DONE_TIMEOUT"
    alive
    a1=$(activity)
    traced=$(traces "$name")
    # The state of the link's port, as its switch tells it.
    # WHOLE: the far end's (the switch itself is dark after Unlink).
    state=-
    if [[ -n ${WHOLE:-} && -n $lid_b ]]; then
        state=$(t 60 smpquery portinfo "$lid_b" "$PORT_B" 2>/dev/null | sed -n 's/^LinkState:\.*//p' || true)
    elif [[ -n $lid_a ]]; then
        state=$(t 60 smpquery portinfo "$lid_a" "$PORT_A" 2>/dev/null | sed -n 's/^LinkState:\.*//p' || true)
    fi
    python3 - "$SM" "$name" "$log" "$from" "$t0" "${a0:-}" "${a1:-}" "$traced" "$via0" "${state:--}" >> "$top/runs.jsonl" <<'PY'
import datetime, json, re, sys, time
sm, name, path, start, t0, a0, a1, traced, via0, state = sys.argv[1:11]
year = time.localtime().tm_year
def when(line):
    m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?Z", line)
    if m:
        t = datetime.datetime.fromisoformat(m.group(1) + "+00:00").timestamp()
        return t + float(m.group(2) or 0)
    m = re.match(r"(\w+ +\d+ \d+:\d+:\d+) (\d+)", line)
    if m:
        t = time.mktime(time.strptime(f"{year} {m.group(1)}", "%Y %b %d %H:%M:%S"))
        return t + int(m.group(2)) / 1e6
    return None
lines = [re.sub(r"\x1b\[[0-9;]*m", "", l) for l in open(path, errors="replace")][int(start):]
done_re = r"repaired|SUBNET UP" if sm == "ibsm" else r"SUBNET UP"
trap_re = r"trap_number=128" if sm == "ibsm" else r"Received Generic Notice"
dones = [l for l in lines if re.search(done_re, l) and when(l)]
traps = [l for l in lines if re.search(trap_re, l) and when(l)]
first = dones[0]
r = {"sm": sm, "event": name, "done_ms": (when(first) - float(t0)) * 1e3,
     "kind": "repair" if "repaired" in first else "sweep", "more": len(dones) - 1,
     "smps": int(a1) - int(a0) if a0 and a1 else None}
num = lambda k: float(m.group(1)) if (m := re.search(rf"\b{k}=([\d.]+)", first)) else None
if sm == "ibsm":
    r["own_ms"] = num("recovery_ms") if r["kind"] == "repair" else num("sweep_ms")
    r["mads_sent"] = num("mads_sent")
    r["lft_blocks"] = num("lft_blocks_sent")
    r["up"] = "up=true" in first or r["kind"] == "sweep"
else:
    r["own_ms"] = (when(first) - when(traps[0])) * 1e3 if traps and when(traps[0]) <= when(first) else None
ok, n, via = map(int, traced.split())
r.update(ok=ok, pairs=n, via_before=int(via0), via_after=via, traps=len(traps), state=state)
print(json.dumps(r))
PY
}

for run in $(seq 1 "$RUNS"); do
    mkdir -p "$top/run$run"
    cd "$top/run$run"
    start_sm info
    i=0
    until grep -q "SUBNET UP" "$log" 2>/dev/null; do
        sleep 0.1
        i=$((i + 1))
        ((i % 10 == 0)) && alive
        ((i < UP_TIMEOUT * 10)) || die "$SM: no SUBNET UP in ${UP_TIMEOUT} s ($(tail -2 "$log"))"
    done
    # A bring-up that sweeps again ends before the event.
    quiet "$log" 2 "$UP_TIMEOUT"
    t 900 ibnetdiscover -p > ports.txt 2> ibnetdiscover.err || die "$SM: ibnetdiscover failed: $(tail -2 ibnetdiscover.err)"
    # The link's leaf end as this SM numbered it, and its LFT: the LIDs it sends over the link.
    lid_a=$(awk -v p="$PORT_A" -v d="( '$DESC_A' - '$DESC_B' )" '$1 == "SW" && $3 == p && index($0, d) { print $2; exit }' ports.txt)
    lid_b=$(awk -v p="$PORT_B" -v d="( '$DESC_B' - '$DESC_A' )" '$1 == "SW" && $3 == p && index($0, d) { print $2; exit }' ports.txt)
    : > route.txt
    if [[ -n $lid_a ]]; then
        t 900 ibroute -n "$lid_a" > route.txt 2> ibroute.err || die "$SM: ibroute $lid_a failed: $(tail -2 ibroute.err)"
    fi
    # The pairs, by LID: half from hosts on the link's switches to hosts their switch reaches
    # over the link (so that they cross it before the event), half spread over the fabric.
    python3 - "$PAIRS" "$DESC_A" "$PORT_A" "$DESC_B" "$PORT_B" ports.txt route.txt > pairs.txt 3> via.re <<'PY' || die "$SM: no host pairs (see $PWD/ports.txt)"
import os, re, sys
npairs, desc_a, port_a, desc_b, port_b, path, route = sys.argv[1:8]
npairs, port_a, port_b = int(npairs), int(port_a), int(port_b)
row = re.compile(r"(CA|SW)\s+(\d+)\s+(\d+)\s+(0x[0-9a-f]+)\s.*?-\s+(CA|SW)\s+(\d+)\s+(\d+)\s+(0x[0-9a-f]+)\s+\( '(.*)' - '(.*)' \)")
cas, near, link = {}, set(), None
for line in open(path):
    m = row.match(line.strip())
    if not m:
        continue
    kind, lid, port, guid, pkind, plid, pport, pguid, desc, pdesc = m.groups()
    if kind == "CA" and int(lid):
        cas[guid + ":" + port] = int(lid)
        if pdesc in (desc_a, desc_b):
            near.add(guid + ":" + port)
    if kind == "SW" and desc == desc_a and int(port) == port_a and pdesc == desc_b and int(pport) == port_b:
        link = (guid, port_a, pguid, port_b)
out = {int(m.group(1), 16): int(m.group(2)) for l in open(route) if (m := re.match(r"0x([0-9a-f]+)\s+(\d+)", l))}
every = sorted(cas)
near = sorted(near)
over = sorted(k for k in every if out.get(cas[k]) == port_a and k not in near)
if len(every) < 2:
    sys.exit(1)
pairs = []
k = npairs // 2 if near and over else 0
for i in range(k):
    pairs.append((near[i % len(near)], over[(2 * i + 1) * len(over) // (2 * k)]))
n, m = len(every), npairs - k
for i in range(m):
    src = every[i * n // m]
    dst = every[(i * n // m + n // 2 + i) % n]
    pairs.append((src, dst if dst != src else every[(every.index(src) + 1) % n]))
for s, d in pairs:
    print(cas[s], cas[d])
with os.fdopen(3, "w") as f:
    if link:
        ga, pa, gb, pb = link
        f.write(rf"^\[{pa}\] -> switch port \{{{gb}\}}\[{pb}\]|^\[{pb}\] -> switch port \{{{ga}\}}\[{pa}\]")
    else:
        print("compare-opensm-recovery: the link is not in ibnetdiscover's output: "
              "crossings not counted", file=sys.stderr)
        f.write("^$.")
PY
    read -r _ _ via0 <<< "$(traces before)"
    # WHOLE: every link of the link's first switch goes, and comes back.
    target=$LINK
    [[ -n ${WHOLE:-} ]] && target=${LINK%%\[*}
    event down "Unlink $target" "$via0"
    via_down=$(tail -1 "$top/runs.jsonl" | python3 -c 'import json, sys; print(json.load(sys.stdin)["via_after"])')
    event up "ReLink $target" "$via_down"
    stop_sm
    trap - EXIT
done

python3 - "$top/runs.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
med = lambda v: statistics.median(v) if v else None
def span(v, unit=" ms", fmt="{:.1f}"):
    v = [x for x in v if x is not None]
    if not v:
        return "-"
    s = fmt.format(med(v)) + unit
    return s + f" ({fmt.format(min(v))}-{fmt.format(max(v))})" if len(v) > 1 else s
for ev, label in (("down", "link down (Unlink)"), ("up", "link up (ReLink)")):
    rs = [r for r in rows if r["event"] == ev]
    if not rs:
        continue
    sm = rs[0]["sm"]
    done = span([r["done_ms"] for r in rs])
    if sm == "ibsm":
        kinds = sorted({r["kind"] for r in rs})
        own = "recovery_ms " + span([r["own_ms"] for r in rs if r["kind"] == "repair"], unit="")
        own += f", {med([r['mads_sent'] for r in rs]):.0f} SMPs, {med([r['lft_blocks'] for r in rs]):.0f} LFT blocks"
        if "sweep" in kinds:
            own += f"; HEAVY SWEEP in {sum(r['kind'] == 'sweep' for r in rs)} runs"
        if not all(r["up"] for r in rs):
            own += "; up=false"
    else:
        own = "trap to SUBNET UP " + span([r["own_ms"] for r in rs])
    more = sum(r["more"] for r in rs)
    if more:
        own += f"; {more} more {'repairs/sweeps' if sm == 'ibsm' else 'heavy sweeps'} after the first"
    smps = span([r["smps"] for r in rs], unit="", fmt="{:.0f}")
    ok = f"{sum(r['ok'] for r in rs)}/{sum(r['pairs'] for r in rs)}"
    states = ", ".join(f"{k} {sum(r['state'] == k for r in rs)}/{len(rs)}" for k in sorted({r["state"] for r in rs}))
    via = f" (via the link: {sum(r['via_before'] for r in rs)} before, {sum(r['via_after'] for r in rs)} after; link port {states})"
    print(f"| {sm} | {label} | {done} | {own} | {smps} | {ok}{via} | {len(rs)} |")
PY
