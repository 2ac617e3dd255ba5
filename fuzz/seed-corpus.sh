#!/usr/bin/env bash
# Fills corpus/<target>/ with seeds from the captured MADs in ../sm-mad/tests/vectors (format
# in the README there): whole MADs for the MAD-layer targets, the attribute data of each SMP
# for its attribute's target, the first record of each SA answer for its record's target,
# plus a few hand-made transfers for the RMPP targets. The corpus is not committed; run this
# once before fuzzing (again after new vectors are captured). Needs only bash and coreutils.
set -euo pipefail
cd "$(dirname "$0")"
VECTORS=../sm-mad/tests/vectors
CORPUS=corpus

# SMP attribute id -> target.
declare -A SMP_TARGET=(
    [0010]=node_description [0011]=node_info [0012]=switch_info [0014]=guid_info
    [0015]=port_info [0016]=pkey_table [0017]=sl2vl [0018]=vl_arb [0019]=lft
    [001b]=mft [0020]=sm_info [0002]=notice
)
# SA attribute id -> record target.
declare -A SA_TARGET=(
    [0001]=class_port_info [0003]=inform_info [0035]=path_record [003a]=multipath_record
    [0038]=mcmember_record [0031]=service_record [00f3]=inform_info_record
    [0011]=node_record [0012]=port_info_record [0020]=link_record [0014]=switch_info_record
    [0015]=lft_record [0017]=mft_record [0033]=pkey_table_record [0013]=sl2vl_record
    [0036]=vl_arb_record [0018]=sm_info_record [0030]=guid_info_record
)
# Bytes of each record on the wire.
declare -A RECORD_LEN=(
    [class_port_info]=72 [inform_info]=36 [path_record]=64 [multipath_record]=200
    [mcmember_record]=52 [service_record]=176 [inform_info_record]=60
    [node_record]=108 [port_info_record]=68 [link_record]=6 [switch_info_record]=24
    [lft_record]=72 [mft_record]=72 [pkey_table_record]=72 [sl2vl_record]=16
    [vl_arb_record]=72 [sm_info_record]=25 [guid_info_record]=72
)

# Writes hex string $2 as bytes to file $1.
put() {
    mkdir -p "$(dirname "$1")"
    # shellcheck disable=SC2059 # the format is the escaped bytes themselves
    printf "$(printf '%s' "$2" | sed 's/../\\x&/g')" > "$1"
}

count=0
for f in "$VECTORS"/*.mad; do
    name=$(basename "$f" .mad)
    hex=$(grep -v '^#' "$f" | tr -d ' \n\r' | tr 'A-F' 'a-f')
    len=$(( ${#hex} / 2 ))
    padded=$hex$(printf '%0*d' $(( 2 * (256 - len) )) 0)
    class=${hex:2:2}
    attr=${hex:32:4}
    put "$CORPUS/mad_header/$name" "$hex"
    case $class in
        01|81)
            put "$CORPUS/smp/$name" "$padded"
            target=${SMP_TARGET[$attr]:-}
            [ -n "$target" ] && put "$CORPUS/$target/$name" "${padded:128:128}"
            ;;
        03)
            put "$CORPUS/sa/$name" "$padded"
            put "$CORPUS/rmpp_header/$name" "${padded:48:24}"
            target=${SA_TARGET[$attr]:-}
            if [ -n "$target" ] && [ "$len" -gt 56 ]; then
                put "$CORPUS/$target/$name" "${padded:112:$(( 2 * ${RECORD_LEN[$target]} ))}"
            fi
            ;;
    esac
    count=$((count + 1))
done

# RMPP: a 3-byte head (payload length, window) then 14-byte steps [segment, op, 12 bytes].
zeros12=000000000000000000000000
put "$CORPUS/rmpp_receiver/in_order" "03e802""0000$zeros12""0100$zeros12""0200$zeros12""0300$zeros12""0400$zeros12"
put "$CORPUS/rmpp_receiver/reordered" "03e802""0000$zeros12""0200$zeros12""0100$zeros12""0100$zeros12""0300$zeros12""0400$zeros12"
put "$CORPUS/rmpp_receiver/single" "006401""0000$zeros12"
# Sender: a 2-byte head (payload length) then 14-byte steps [op, 12 bytes of RMPP header,
# 1 spare]: ACKs of segments 1, 3 and 5 opening the window, a timeout; an ABORT.
ack() { printf '0101020100%08x%08x00' "$1" "$2"; }
put "$CORPUS/rmpp_sender/acks" "03e8$(ack 1 3)$(ack 3 5)0400000000000000000000000000$(ack 5 5)"
put "$CORPUS/rmpp_sender/abort" "0190""0101040176000000000000000000"

echo "seeded corpus/ from $count vectors:"
for d in "$CORPUS"/*/; do
    printf '  %-20s %s\n' "$(basename "$d")" "$(find "$d" -type f | wc -l)"
done
