#!/usr/bin/env bash
# Runs every fuzz target in turn for SECONDS (default 30) each on this machine's stable
# toolchain (see README.md), and prints one line per target. Exits non-zero if any target
# found a crash; its input is then under artifacts/<target>/.
set -uo pipefail
cd "$(dirname "$0")"
SECONDS_EACH=${1:-30}
export RUSTC_BOOTSTRAP=1
cargo fuzz build >/dev/null || exit 1
failed=0
for target in $(cargo fuzz list); do
    log=$(mktemp)
    if cargo fuzz run "$target" -- -max_total_time="$SECONDS_EACH" >"$log" 2>&1; then
        printf '%-20s ok    %s\n' "$target" \
            "$(grep -E '^Done [0-9]+ runs' "$log" | tail -1); $(grep -Eo 'DONE[[:space:]]+cov: [0-9]+ ft: [0-9]+ corp: [0-9]+' "$log" | tail -1)"
    else
        printf '%-20s CRASH (log: %s)\n' "$target" "$log"
        failed=1
        continue
    fi
    rm -f "$log"
done
exit $failed
