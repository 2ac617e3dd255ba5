#!/usr/bin/env bash
# Captures real MADs as codec test vectors: ibsim's SMA answers, OpenSM's SA and SMInfo
# answers, and the requests infiniband-diags sends, all from their own debug hex dumps.
#
#   tools/capture-vectors.sh [OUTDIR]      (default: sm-mad/tests/vectors)
#
# Needs (Debian): ibsim-utils libumad2sim0 infiniband-diags opensm, plus perl, iproute2,
# util-linux (unshare). Runs everything in a private network namespace, in a scratch
# directory that is removed afterwards (KEEP_SCRATCH=1 keeps it, with every diag's output).
# Only when every capture succeeded are the *.mad files in OUTDIR replaced; otherwise
# OUTDIR is left alone and the scratch directory kept. Every run writes the same set of
# files; the bytes differ only in TIDs and in the 24 bytes the shim does not deliver (see
# the README next to the vectors).
set -euo pipefail

SHIM=${SHIM:-/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so}
NETDIR=${NETDIR:-/usr/share/doc/ibsim-utils/net-examples}
DIAG_TIMEOUT=${DIAG_TIMEOUT:-10}

die() { echo "capture-vectors: $*" >&2; exit 1; }

if [[ ${1:-} != --inner ]]; then
    here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
    out=${1:-$here/../sm-mad/tests/vectors}
    mkdir -p "$out"
    out=$(cd "$out" && pwd)
    for t in ibsim opensm smpquery saquery ibroute sminfo perl ip unshare timeout dpkg-query; do
        command -v "$t" >/dev/null || die "missing $t (apt-get install ibsim-utils libumad2sim0 infiniband-diags opensm)"
    done
    [[ -r $SHIM ]] || die "missing $SHIM (apt-get install libumad2sim0)"
    scratch=$(mktemp -d "${TMPDIR:-/tmp}/capture-vectors.XXXXXX")
    mkdir "$scratch/out"
    if [[ $(id -u) == 0 ]]; then ns=(unshare -n); else ns=(unshare -rn); fi
    rc=0
    "${ns[@]}" bash "${BASH_SOURCE[0]}" --inner "$scratch" "$scratch/out" || rc=$?
    if [[ -s $scratch/failures ]]; then
        echo "capture-vectors: failures:" >&2
        cat "$scratch/failures" >&2
        rc=1
    fi
    if [[ $rc != 0 ]]; then
        echo "capture-vectors: $out left as it was; diag output kept in $scratch" >&2
        exit $rc
    fi
    rm -f "$out"/*.mad
    cp "$scratch"/out/*.mad "$out"/
    echo "capture-vectors: $(find "$out" -name '*.mad' | wc -l) files in $out"
    if [[ ${KEEP_SCRATCH:-0} == 1 ]]; then
        echo "capture-vectors: diag output kept in $scratch"
    else
        rm -rf "$scratch"
    fi
    exit 0
fi

# ---- inside the private network namespace ----
SCRATCH=$2
OUT=$3
ip link set lo up

OSM_VERSION="opensm $(dpkg-query -W -f '${Version}' opensm | sed 's/-[^-]*$//')"
EXTRACT=$SCRATCH/extract.pl
FAILURES=$SCRATCH/failures
: >"$FAILURES"

# The extractor: finds the request/response pair of one attribute in a diag's debug output,
# checks the dump framing, and writes NAME.req.mad and NAME.resp.mad.
cat >"$EXTRACT" <<'PERL'
use strict;
use warnings;

my %o;
while (@ARGV && $ARGV[0] =~ /^--(\w+)$/) { shift @ARGV; $o{$1} = shift @ARGV; }
my @expects = @ARGV;
sub fail { print STDERR "$o{name}: @_\n"; exit 1; }

sub slurp { my ($f) = @_; open my $fh, '<', $f or fail("$f: $!"); local $/; my $t = <$fh>; $t // '' }
# Decoded output is on stdout, error reports on stderr.
my $stdout = slurp($o{stdout}) . "\n" . slurp($o{stderr});

# Hex dumps: a title line, then lines of 4-digit groups. smpquery/ibroute/sminfo print
# "send buf" (the 64-byte user_mad header + the MAD) and "rcv buf" (the MAD) on stderr;
# saquery prints "SA Request:" / "SA Response:" (the MAD) on stdout.
my @blocks;
for my $f ($o{stderr}, $o{stdout}) {
    my $cur;
    for my $l (split /\n/, slurp($f)) {
        if ($l =~ /^(send buf|rcv buf|SA Request:|SA Response:)\s*$/) {
            $cur = { kind => $1, hex => '' };
            push @blocks, $cur;
        } elsif ($cur && $l =~ /^\s*((?:[0-9a-f]{4}\s*)+)$/) {
            (my $h = $1) =~ s/\s//g;
            $cur->{hex} .= $h;
        } else {
            undef $cur;
        }
    }
}
for my $b (@blocks) {
    my @by = map { hex } ($b->{hex} =~ /(..)/g);
    my $n = @by;
    if ($b->{kind} eq 'send buf') {
        fail("send buf is $n bytes, expected 64 (user_mad header) + 256") unless $n == 320;
        @by = @by[64 .. 319];
    } elsif ($b->{kind} eq 'rcv buf' || $b->{kind} eq 'SA Request:') {
        fail("$b->{kind} is $n bytes, expected 256") unless $n == 256;
    } else {
        fail("$b->{kind} is $n bytes") unless $n >= 24 && $n <= 256;
    }
    fail("$b->{kind}: base version $by[0], not 1") unless $by[0] == 1;
    $b->{mad} = \@by;
    $b->{response} = $by[3] & 0x80;
    $b->{attr} = $by[16] << 8 | $by[17];
    $b->{mod} = $by[20] << 24 | $by[21] << 16 | $by[22] << 8 | $by[23];
    $b->{tid} = join '', map { sprintf '%02x', $_ } @by[12 .. 15];    # low 32 bits
}

my ($attr, $mod) = split /:/, $o{sel};
my ($req, $resp);
for my $i (0 .. $#blocks) {
    my $b = $blocks[$i];
    next if $b->{response} || $b->{attr} != hex($attr) || (defined $mod && $b->{mod} != hex($mod));
    ($resp) = grep { $_->{response} && $_->{tid} eq $b->{tid} } @blocks[$i + 1 .. $#blocks];
    if ($resp) { $req = $b; last }
}
fail("no answered request for attribute $o{sel} among " . scalar(@blocks) . " dumps") unless $req;

# Expectations, read off the diag's decoded output:
#   field<Label      the value printed after "Label....." (smpquery "Label:....", saquery "label....")
#   field~regex      group 1 of a multi-line regex over stdout
#   field=value      a literal (e.g. taken from the command line)
# `req:` in front puts the line in the request file. `field(>>S&M)` extracts bits of a
# number the diag printed as one raw byte; `field(int)` prints a number in decimal.
# A field ending in [] takes a row of values and numbers them field[0], field[1], ...
my (@req_exp, @resp_exp);
sub num { my ($v) = @_; $v =~ /^0x([0-9a-f]+)$/i ? hex($1) : $v =~ /^\d+$/ ? $v + 0 : fail("not a number: '$v'") }
for my $e (@expects) {
    my ($side, $field, $xf, $op, $arg) = $e =~ /^(req:)?([\w.\[\]]+?)(?:\(([^)]*)\))?([<~=])(.*)$/
        or fail("bad expectation '$e'");
    my $v;
    if ($op eq '=') {
        $v = $arg;
    } elsif ($op eq '<') {
        $stdout =~ /^[ \t]*\Q$arg\E:?\.{2,}[ \t]*(.*?)[ \t]*$/m or fail("'$arg' not in the diag's output");
        $v = $1;
    } else {
        $stdout =~ /$arg/m or fail("/$arg/ not in the diag's output");
        $v = $1;
    }
    my @vals = ($v);
    my $list = $field =~ s/\[\]$//;
    @vals = grep { length } split /[\s|]+/, $v if $list;
    for (@vals) {
        next unless defined $xf;
        if ($xf eq 'int') { $_ = num($_) }
        elsif ($xf =~ /^>>(\d+)&(\S+)$/) { $_ = (num($_) >> $1) & num($2) }
        else { fail("bad transform '$xf'") }
    }
    my @lines = $list ? map { "$field\[$_]=$vals[$_]" } 0 .. $#vals : ("$field=$vals[0]");
    push @{ $side ? \@req_exp : \@resp_exp }, @lines;
}

sub write_vec {
    my ($dir, $mad, $exp) = @_;
    my $path = "$o{out}/$o{name}." . ($dir eq 'request' ? 'req' : 'resp') . '.mad';
    open my $fh, '>', $path or fail("$path: $!");
    print $fh "# command: $o{command}\n";
    print $fh "# fabric: $o{fabric}   sm: $o{sm}\n";
    print $fh "# direction: $dir\n";
    print $fh "# expect: $_\n" for @$exp;
    my @m = @$mad;
    while (my @line = splice @m, 0, 16) {
        my $h = join '', map { sprintf '%02x', $_ } @line;
        print $fh join(' ', $h =~ /(.{1,4})/g), "\n";
    }
    close $fh or fail("$path: $!");
}
write_vec('request', $req->{mad}, \@req_exp);
write_vec('response', $resp->{mad}, \@resp_exp);
PERL

FABRIC=
SM=none
HOST=
RUN=0
LAST=
LAST_CMD=
LAST_RC=0

fail() { echo "  $*" | tee -a "$FAILURES" >&2; }

# The shim attaches to the node named by SIM_HOST, else to the fabric's first node.
attach() {
    if [[ -n $HOST ]]; then export SIM_HOST=$HOST; else unset SIM_HOST; fi
}

# diag CMD ARGS...: runs one diag tool under the shim with -d -d -d (attached at $HOST),
# keeping its stdout and stderr for `vec`.
diag() {
    local tool=$1
    shift
    RUN=$((RUN + 1))
    LAST=$SCRATCH/$FABRIC/run$RUN
    mkdir -p "$LAST"
    local argv=("$tool" -d -d -d "$@")
    LAST_CMD="${HOST:+SIM_HOST=$HOST }${argv[*]}"
    echo "$LAST_CMD" >"$LAST/cmd"
    LAST_RC=0
    (cd "$LAST" && attach && LD_PRELOAD=$SHIM \
        timeout -k 2 "$DIAG_TIMEOUT" "${argv[@]}" >stdout 2>stderr) || LAST_RC=$?
    if [[ $LAST_RC == 124 || $LAST_RC == 137 ]]; then
        fail "$FABRIC: hung (killed after ${DIAG_TIMEOUT}s): $LAST_CMD"
    fi
}

# vec NAME ATTR[:MOD] EXPECT...: writes the last diag's exchange for that attribute.
# OKRC=n allows the diag to exit with n (an error answer that is itself the vector).
vec() {
    local name=$1 sel=$2
    shift 2
    if [[ $LAST_RC != "${OKRC:-0}" ]]; then
        fail "$FABRIC: $name: exit status $LAST_RC: $LAST_CMD: $(grep -v '^ibwarn\|^ibdebug' "$LAST/stderr" | tail -1)"
        return 0
    fi
    perl "$EXTRACT" --out "$OUT" --name "$name" --sel "$sel" --command "$LAST_CMD" \
        --fabric "$FABRIC" --sm "$SM" --stdout "$LAST/stdout" --stderr "$LAST/stderr" \
        "$@" 2>>"$FAILURES" || fail "$FABRIC: $name: not extracted from: $LAST_CMD"
}

# lid_of DRPATH PORT: the LID OpenSM gave the port at the end of a directed route.
lid_of() {
    local lid
    lid=$(cd "$SCRATCH/$FABRIC" && attach && LD_PRELOAD=$SHIM \
        timeout -k 2 "$DIAG_TIMEOUT" smpquery -D portinfo "$1" "$2" 2>/dev/null |
        sed -n 's/^Lid:\.*\([0-9]*\)$/\1/p')
    [[ -n $lid && $lid != 0 ]] || die "no LID at DR path $1 port $2"
    echo "$lid"
}

SIM_PID=
OSM_PID=
stop() {
    local pid
    for pid in $OSM_PID $SIM_PID; do
        kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
    done
    OSM_PID=
    SIM_PID=
}
trap stop EXIT

start_fabric() {
    FABRIC=$1
    SM=none
    local dir=$SCRATCH/$FABRIC
    mkdir -p "$dir"
    cp "$NETDIR/$FABRIC" "$dir/"
    (cd "$dir" && exec ibsim -s "$FABRIC" --no-console >ibsim.log 2>&1) &
    SIM_PID=$!
    local i
    for i in $(seq 50); do
        grep -q '@sim:ctl' /proc/net/unix && return 0
        sleep 0.1
    done
    die "ibsim did not start on $FABRIC"
}

# Runs OpenSM in the background on the fabric's first node (its SM port) until `stop`.
start_opensm() {
    local dir=$SCRATCH/$FABRIC/osm
    mkdir -p "$dir"
    : >"$dir/opensm.conf"
    (cd "$dir" && unset SIM_HOST && LD_PRELOAD=$SHIM OSM_TMP_DIR=$dir OSM_CACHE_DIR=$dir \
        exec opensm -F "$dir/opensm.conf" -f "$dir/osm.log" -d 2 >stdout 2>&1) &
    OSM_PID=$!
    local i
    for i in $(seq 300); do
        grep -q 'SUBNET UP' "$dir/osm.log" 2>/dev/null && { SM=$OSM_VERSION; return 0; }
        sleep 0.1
    done
    die "OpenSM did not bring $FABRIC up"
}

# Field names are the specification's, in snake_case; labels are what the diags print.
NI=(base_version'<BaseVers' class_version'<ClassVers' node_type'<NodeType' num_ports'<NumPorts'
    system_image_guid'<SystemGuid' node_guid'<Guid' port_guid'<PortGuid' partition_cap'<PartCap'
    device_id'<DevId' revision'<Revision' local_port_num'<LocalPort' vendor_id'<VendorId')
ND=(node_string'<Node Description')
pi_fields() { # prefix
    local p=$1
    echo "${p}lid<Lid ${p}master_sm_lid<SMLid ${p}capability_mask<CapMask
        ${p}m_key_lease_period<MkeyLeasePeriod ${p}local_port_num<LocalPort
        ${p}link_width_enabled<LinkWidthEnabled ${p}link_width_active<LinkWidthActive
        ${p}port_state<LinkState ${p}port_physical_state<PhysLinkState
        ${p}link_down_default_state<LinkDownDefState ${p}lmc<LMC ${p}link_speed_active<LinkSpeedActive
        ${p}link_speed_enabled<LinkSpeedEnabled ${p}neighbor_mtu<NeighborMTU ${p}master_sm_sl<SMSL
        ${p}vl_cap<VLCap ${p}vl_high_limit<VLHighLimit ${p}vl_arbitration_high_cap<VLArbHighCap
        ${p}vl_arbitration_low_cap<VLArbLowCap ${p}mtu_cap<MtuCap ${p}vl_stall_count<VLStallCount
        ${p}hoq_life<HoqLife ${p}operational_vls<OperVLs ${p}guid_cap<GuidCap
        ${p}client_reregister<ClientReregister ${p}subnet_timeout<SubnetTimeout
        ${p}resp_time_value<RespTimeVal ${p}capability_mask2<CapabilityMask2"
}
read -r -d '' -a PI < <(pi_fields '') || true
SI=(linear_fdb_cap'<LinearFdbCap' random_fdb_cap'<RandomFdbCap' multicast_fdb_cap'<McastFdbCap'
    linear_fdb_top'<LinearFdbTop' default_port'<DefPort'
    default_multicast_primary_port'<DefMcastPrimPort' default_multicast_not_primary_port'<DefMcastNotPrimPort'
    life_time_value'<LifeTime' port_state_change'<StateChange'
    optimized_sl_to_vl_mapping_programming'<OptSLtoVLMapping' lids_per_port'<LidsPerPort'
    partition_enforcement_cap'<PartEnforceCap' inbound_enforcement_cap'<InboundPartEnf'
    outbound_enforcement_cap'<OutboundPartEnf' filter_raw_inbound_cap'<FilterRawInbound'
    filter_raw_outbound_cap'<FilterRawOutbound' enhanced_port0'<EnhancedPort0'
    multicast_fdb_top'<MulticastFDBTop')
PKEYS=('p_key[]~^\s*0:((?: 0x[0-9a-f]{4})+)$')
SL2VL_ROW() { echo "sl_to_vl[]~^ports: in\\s+$1, out\\s+$2:((?:\\s*\\|\\s*\\d+)+)\\|\$"; }
VLARB_LOW=('vl[]~(?s)Low priority.*?^VL\s*:((?: \|0x[0-9a-f]+\s*)+)\|$'
    'weight[]~(?s)Low priority.*?^WEIGHT:((?: \|0x[0-9a-f]+\s*)+)\|$')
VLARB_HIGH=('vl[]~(?s)High priority.*?^VL\s*:((?: \|0x[0-9a-f]+\s*)+)\|$'
    'weight[]~(?s)High priority.*?^WEIGHT:((?: \|0x[0-9a-f]+\s*)+)\|$')
GUIDS=('guid[]~^\s*0:((?: 0x[0-9a-f]{16})+)$')
SMINFO=('guid~sm guid (0x[0-9a-f]+)' 'act_count~activity count (\d+)' 'priority~priority (\d+)'
    'sm_state~ state (\d+)')
NR=(lid'<lid' node_info.base_version'(int)<base_version' node_info.class_version'(int)<class_version'
    node_info.node_type'<node_type' node_info.num_ports'<num_ports'
    node_info.system_image_guid'<sys_guid' node_info.node_guid'<node_guid'
    node_info.port_guid'<port_guid' node_info.partition_cap'(int)<partition_cap'
    node_info.device_id'<device_id' node_info.revision'<revision'
    node_info.local_port_num'<port_num' node_info.vendor_id'<vendor_id'
    node_description.node_string'<NodeDescription')
read -r -d '' -a PIR < <(echo "end_port_lid<EndPortLid port_num<PortNum options<Options
    port_info.gid_prefix<GidPrefix"; pi_fields port_info.) || true
PR=(service_id'<service_id' dgid'<dgid' sgid'<sgid' dlid'<dlid' slid'<slid'
    'flow_label(>>8&0xfffff)<hop_flow_raw' 'hop_limit(>>0&0xff)<hop_flow_raw' tclass'<tclass'
    'reversible(>>7&1)<num_path_revers' 'numb_path(>>0&0x7f)<num_path_revers' p_key'<pkey'
    qos_class'<qos_class' sl'<sl' 'mtu_selector(>>6&3)<mtu' 'mtu(>>0&0x3f)<mtu'
    'rate_selector(>>6&3)<rate' 'rate(>>0&0x3f)<rate'
    'packet_life_time_selector(>>6&3)<pkt_life' 'packet_life_time(>>0&0x3f)<pkt_life'
    preference'<preference')

# ---------------------------------------------------------------------------------------------
# Fabric 1: two switches joined by two links, four HCAs on port 1.
# The diags attach at Hca1 (so directed routes start 0,1,...); OpenSM runs at Switch1.
start_fabric net.2sw2path4hca
echo "capture-vectors: $FABRIC, no SM: directed route"
HOST=Hca1
diag smpquery -D nodeinfo 0
vec dr_nodeinfo_hca_local 0x11 "${NI[@]}"
diag smpquery -D nodeinfo 0,1
vec dr_nodeinfo_switch 0x11 "${NI[@]}"
diag smpquery -D nodeinfo 0,1,3,1
vec dr_nodeinfo_hca_3hop 0x11 "${NI[@]}"
diag smpquery -D nodedesc 0,1
vec dr_nodedesc_switch 0x10 "${ND[@]}"
diag smpquery -D nodedesc 0,1,3,1
vec dr_nodedesc_hca_3hop 0x10 "${ND[@]}"
diag smpquery -D portinfo 0 1
vec dr_portinfo_hca_local 0x15 "${PI[@]}"
diag smpquery -D portinfo 0,1 0
vec dr_portinfo_switch_port0 0x15 "${PI[@]}"
diag smpquery -D portinfo 0,1 3
vec dr_portinfo_switch_port3 0x15 "${PI[@]}"
diag smpquery -D portinfo 0,1,3,1 1
vec dr_portinfo_hca_3hop 0x15 "${PI[@]}"
diag smpquery -D switchinfo 0,1
vec dr_switchinfo 0x12 "${SI[@]}"
diag smpquery -D switchinfo 0,1,3
vec dr_switchinfo_2hop 0x12 "${SI[@]}"
diag smpquery -D pkeys 0 1
vec dr_pkeys_hca 0x16:0x00010000 "${PKEYS[@]}"
diag smpquery -D pkeys 0,1 0
vec dr_pkeys_switch_port0 0x16:0 "${PKEYS[@]}"
diag smpquery -D sl2vl 0 1
vec dr_sl2vl_hca 0x17 "$(SL2VL_ROW 0 0)"
diag smpquery -D sl2vl 0,1 3
vec dr_sl2vl_switch_in1_out3 0x17:0x0103 "$(SL2VL_ROW 1 3)"
diag smpquery -D vlarb 0 1
vec dr_vlarb_low_hca 0x18:0x00010001 "${VLARB_LOW[@]}"
vec dr_vlarb_high_hca 0x18:0x00030001 "${VLARB_HIGH[@]}"
diag smpquery -D vlarb 0,1 3
vec dr_vlarb_low_switch_port3 0x18:0x00010003 "${VLARB_LOW[@]}"
diag smpquery -D guidinfo 0
vec dr_guidinfo_hca 0x14:0 "${GUIDS[@]}"
# From Switch1 itself (the shim's default node), two hops away.
HOST=
diag smpquery -D nodeinfo 0,3,1
vec dr_nodeinfo_from_switch_2hop 0x11 "${NI[@]}"
diag smpquery -D portinfo 0,3,1 1
vec dr_portinfo_from_switch_2hop 0x15 "${PI[@]}"

echo "capture-vectors: $FABRIC, OpenSM: LID routed, SMInfo, SA"
start_opensm
HOST=Hca1
SW1=$(lid_of 0,1 0)
SW2=$(lid_of 0,1,3 0)
HCA1=$(lid_of 0 1)
HCA2=$(lid_of 0,1,3,1 1)
HCA3=$(lid_of 0,1,2 1)
diag smpquery nodeinfo "$SW2"
vec lr_nodeinfo_switch 0x11 "${NI[@]}"
diag smpquery nodeinfo "$HCA2"
vec lr_nodeinfo_hca 0x11 "${NI[@]}"
diag smpquery nodedesc "$SW2"
vec lr_nodedesc_switch 0x10 "${ND[@]}"
diag smpquery nodedesc "$HCA2"
vec lr_nodedesc_hca 0x10 "${ND[@]}"
diag smpquery portinfo "$HCA2" 1
vec lr_portinfo_hca 0x15 "${PI[@]}"
diag smpquery portinfo "$SW1" 0
vec lr_portinfo_switch_port0 0x15 "${PI[@]}"
diag smpquery portinfo "$SW2" 3
vec lr_portinfo_switch_port3 0x15 "${PI[@]}"
diag smpquery switchinfo "$SW1"
vec lr_switchinfo 0x12 "${SI[@]}"
diag smpquery pkeys "$HCA2" 1
vec lr_pkeys_hca 0x16:0x00010000 "${PKEYS[@]}"
diag smpquery sl2vl "$HCA2" 1
vec lr_sl2vl_hca 0x17 "$(SL2VL_ROW 0 0)"
diag smpquery vlarb "$HCA2" 1
vec lr_vlarb_low_hca 0x18:0x00010001 "${VLARB_LOW[@]}"
vec lr_vlarb_high_hca 0x18:0x00030001 "${VLARB_HIGH[@]}"
diag smpquery guidinfo "$HCA2"
vec lr_guidinfo_hca 0x14:0 "${GUIDS[@]}"
# ibroute prints "0xLLLL PPP : ..." per valid LID of the block.
lft_expects() {
    local l
    for l in $(printf '%s\n' "$SW1" "$SW2" "$HCA1" "$HCA2" "$HCA3" | sort -n); do
        printf 'port[%d](int)~^0x%04x (\\d+) :\n' "$l" "$l"
    done
}
mapfile -t LFT < <(lft_expects)
diag ibroute "$SW1"
vec lr_lft_block0 0x19:0 "${LFT[@]}"
diag ibroute -D 0,1
vec dr_lft_block0 0x19:0 "${LFT[@]}"
# No port joins a multicast group (no diag can send a join), so every MFT block is empty.
diag ibroute -M "$SW1"
vec lr_mft_block0 0x1b:0
diag sminfo
vec lr_sminfo 0x20 "${SMINFO[@]}"
diag sminfo -D 0,1
vec dr_sminfo 0x20 "${SMINFO[@]}"

diag saquery -c
vec sa_classportinfo 0x01 base_version'<Base version' class_version'<Class version' \
    capability_mask'<Capability mask' capability_mask2'<Capability mask 2' \
    resp_time_value'<Response time value' redirect_lid'<Redirect LID' \
    redirect_p_key'<Redirect PKey' redirect_qp'<Redirect QP' redirect_q_key'<Redirect QKey' \
    trap_lid'<Trap LID' trap_p_key'<Trap PKey' trap_q_key'<Trap QKey'
diag saquery NR "$HCA2"
vec sa_noderecord 0x11 "req:lid=$HCA2" "${NR[@]}"
diag saquery NR "$SW1"
vec sa_noderecord_switch 0x11 "req:lid=$SW1" "${NR[@]}"
diag saquery PIR "$HCA2/1"
vec sa_portinforecord 0x12 "req:end_port_lid=$HCA2" "req:port_num=1" "${PIR[@]}"
diag saquery PIR "$SW1/0"
vec sa_portinforecord_switch_port0 0x12 "req:end_port_lid=$SW1" "req:port_num=0" "${PIR[@]}"
diag saquery -s
vec sa_portinforecord_issm 0x12 end_port_lid'<EndPortLid' port_num'<PortNum' \
    port_info.lid'<base_lid' port_info.master_sm_lid'<master_sm_base_lid' \
    port_info.capability_mask'<capability_mask'
diag saquery SWIR "$SW1"
vec sa_switchinforecord 0x14 "req:lid=$SW1" lid'<LID' switch_info.linear_fdb_cap'(int)<LinearFDBCap' \
    switch_info.random_fdb_cap'(int)<RandomFDBCap' switch_info.multicast_fdb_cap'(int)<MulticastFDBCap' \
    switch_info.linear_fdb_top'(int)<LinearFDBTop' switch_info.default_port'<DefaultPort' \
    'switch_info.life_time_value(>>3&0x1f)<LifeTimeValue/PortStateChange/OpSL2VL' \
    'switch_info.port_state_change(>>2&1)<LifeTimeValue/PortStateChange/OpSL2VL' \
    switch_info.lids_per_port'(int)<LIDsPerPort' \
    switch_info.partition_enforcement_cap'(int)<PartitionEnforcementCap' \
    'switch_info.filter_raw_inbound_cap(>>5&1)<flags' 'switch_info.filter_raw_outbound_cap(>>4&1)<flags' \
    switch_info.multicast_fdb_top'(int)<MulticastFDBTop'
diag saquery LR "$HCA2/1"
vec sa_linkrecord 0x20 "req:from_lid=$HCA2" "req:from_port=1" from_lid'<FromLID' \
    from_port'<FromPort' to_port'<ToPort' to_lid'<ToLID'
diag saquery PR --slid "$HCA1" --dlid "$HCA2"
vec sa_pathrecord 0x35 "req:slid=$HCA1" "req:dlid=$HCA2" "${PR[@]}"
diag saquery PR --slid "$HCA1" --dlid "$HCA3"
vec sa_pathrecord_same_switch 0x35 "req:slid=$HCA1" "req:dlid=$HCA3" "${PR[@]}"
diag saquery MCMR
vec sa_mcmemberrecord 0x38 mgid'<MGID' port_gid'<PortGid' q_key'<qkey' mlid'<mlid' \
    'mtu_selector(>>6&3)<mtu' 'mtu(>>0&0x3f)<mtu' tclass'<TClass' p_key'<pkey' \
    'rate_selector(>>6&3)<rate' 'rate(>>0&0x3f)<rate' \
    'packet_life_time_selector(>>6&3)<pkt_life' 'packet_life_time(>>0&0x3f)<pkt_life' \
    sl'<SL' flow_label'<FlowLabel' hop_limit'<HopLimit' scope'<Scope' join_state'<JoinState' \
    proxy_join'<ProxyJoin'
diag saquery SMIR
vec sa_sminforecord 0x18 lid'<LID' sm_info.guid'<GUID' sm_info.sm_key'<SM_Key' \
    sm_info.act_count'<ActCount' sm_info.priority'<Priority' sm_info.sm_state'<SMState'
diag saquery GIR "$HCA2/0"
vec sa_guidinforecord 0x30 "req:lid=$HCA2" "req:block_num=0" lid'<LID' block_num'<Block' \
    'guid_info.guid[0]<GUID 0' 'guid_info.guid[1]<GUID 1'
# OpenSM answers P_KeyTableRecord only to a trusted requester (SM_Key = its sm_key, 1).
PKTR=(lid'<LID' port_num'<Port' block_num'<Block'
    'p_key_table.p_key[]~PKey Table:\n\s*((?:0x[0-9a-f]{4} ?)+)$')
diag saquery --smkey 1 PKTR "$HCA2/1/0"
vec sa_pkeytablerecord 0x33 "req:lid=$HCA2" "${PKTR[@]}"
diag saquery PKTR "$HCA2/1/0"
OKRC=5 vec sa_pkeytablerecord_untrusted 0x33 "req:lid=$HCA2" 'status~returned (0x[0-9a-f]{4})'
SL2VLR=(lid'<LID' input_port_num'<InPort' output_port_num'<OutPort'
    'sl_to_vl_mapping_table.sl_to_vl[]~^\s*VL:((?:\s*\d+\|)+)$')
diag saquery SL2VL "$HCA2"
vec sa_sl2vlrecord 0x13 "req:lid=$HCA2" "${SL2VLR[@]}"
diag saquery SL2VL "$SW1/1/3"
vec sa_sl2vlrecord_switch 0x13 "req:lid=$SW1" "req:input_port_num=1" "req:output_port_num=3" "${SL2VLR[@]}"
diag saquery VLAR "$HCA2/1/1"
vec sa_vlarbrecord 0x36 "req:lid=$HCA2" "req:output_port_num=1" "req:block_num=1" lid'<LID' \
    output_port_num'<Port' block_num'<Block' \
    'vl_arbitration_table.vl[]~^\s*VL\s*:((?:\s*\d+\|)+)$' \
    'vl_arbitration_table.weight[]~^\s*Weight:((?:\s*\d+\|)+)$'
lftr_expects() {
    local l
    for l in $(printf '%s\n' "$SW1" "$SW2" "$HCA1" "$HCA2" "$HCA3" | sort -n); do
        printf 'linear_forwarding_table.port[%d]~^\\s*%d\\t(\\d+)$\n' "$l" "$l"
    done
}
mapfile -t LFTR < <(lftr_expects)
diag saquery LFTR "$SW1/0"
vec sa_lftrecord 0x15 "req:lid=$SW1" "req:block_num=0" lid'<LID' block_num'<Block' "${LFTR[@]}"
diag saquery MFTR "$SW1/0/0"
vec sa_mftrecord_empty 0x17 "req:lid=$SW1"
stop

# ---------------------------------------------------------------------------------------------
# Fabric 2: the same, with both ports of each of the two HCAs cabled.
start_fabric net.2sw2path4hca2port
echo "capture-vectors: $FABRIC, no SM: directed route"
HOST=Hca1
diag smpquery -D nodeinfo 0,1,2
vec dr_nodeinfo_hca_port2 0x11 "${NI[@]}"
diag smpquery -D portinfo 0,1,2 2
vec dr_portinfo_hca_port2 0x15 "${PI[@]}"
diag smpquery -D nodeinfo 0,1,3,2
vec dr_nodeinfo_remote_hca_port2 0x11 "${NI[@]}"

echo "capture-vectors: $FABRIC, OpenSM: LID routed, SA"
start_opensm
HOST=Hca1
H1P1=$(lid_of 0 1)
H1P2=$(lid_of 0,1,2 2)
H2P2=$(lid_of 0,1,3,2 2)
diag smpquery nodeinfo "$H1P2"
vec lr_nodeinfo_hca_port2 0x11 "${NI[@]}"
diag smpquery portinfo "$H1P2" 2
vec lr_portinfo_hca_port2 0x15 "${PI[@]}"
diag saquery NR "$H1P2"
vec sa_noderecord_port2 0x11 "req:lid=$H1P2" "${NR[@]}"
diag saquery PIR "$H1P2/2"
vec sa_portinforecord_port2 0x12 "req:end_port_lid=$H1P2" "req:port_num=2" "${PIR[@]}"
diag saquery LR "$H2P2/2"
vec sa_linkrecord_port2 0x20 "req:from_lid=$H2P2" "req:from_port=2" from_lid'<FromLID' \
    from_port'<FromPort' to_port'<ToPort' to_lid'<ToLID'
diag saquery PR --slid "$H1P2" --dlid "$H2P2"
vec sa_pathrecord_port2 0x35 "req:slid=$H1P2" "req:dlid=$H2P2" "${PR[@]}"
diag saquery PR --slid "$H1P1" --dlid "$H1P2"
vec sa_pathrecord_same_hca 0x35 "req:slid=$H1P1" "req:dlid=$H1P2" "${PR[@]}"
stop
