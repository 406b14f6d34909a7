#!/usr/bin/env bash
# Checks contrib/smolcord.service: `systemd-analyze verify` must print
# nothing (it exits 0 even on unknown keys, so any output is a failure), and
# the offline security exposure must stay at or below 2.0 ("OK").
# Installs systemd (for systemd-analyze) with apt-get if it is missing.
#
#   scripts/check-unit.sh [SMOLCORD_BINARY]
#
# verify wants ExecStart's program to exist; the unit's /usr/local/bin path
# is replaced by SMOLCORD_BINARY (default: a release or debug build in the
# cargo target dir, else a stand-in script) in a temporary copy.
set -euo pipefail
cd "$(dirname "$0")/.."
unit=contrib/smolcord.service

if ! command -v systemd-analyze >/dev/null; then
    echo "check-unit: installing systemd (for systemd-analyze)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends systemd >/dev/null
fi
echo "check-unit: $(systemd-analyze --version | head -1)"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

target_dir=${CARGO_TARGET_DIR:-target}
binary=${1:-}
if [[ -z $binary ]]; then
    for candidate in "$target_dir/release/smolcord" "$target_dir/debug/smolcord"; do
        if [[ -x $candidate ]]; then binary=$candidate; break; fi
    done
fi
if [[ -z $binary ]]; then
    binary=$work/smolcord
    printf '#!/bin/sh\nexit 0\n' >"$binary"
    chmod +x "$binary"
fi
binary=$(realpath "$binary")
sed "s#/usr/local/bin/smolcord#$binary#g" "$unit" >"$work/smolcord.service"

status=0
report=$(systemd-analyze verify "$work/smolcord.service" 2>&1) || status=$?
if [[ $status -ne 0 || -n $report ]]; then
    echo "check-unit: systemd-analyze verify complained (exit $status):" >&2
    echo "$report" >&2
    exit 1
fi
echo "check-unit: systemd-analyze verify: clean"

# 20 on systemd's 0-100 scale is exposure 2.0.
exposure=$(systemd-analyze security --offline=true "$work/smolcord.service" 2>&1 | grep 'Overall exposure' || true)
if ! systemd-analyze security --offline=true --threshold=20 "$work/smolcord.service" >/dev/null 2>&1; then
    echo "check-unit: exposure above 2.0: $exposure" >&2
    exit 1
fi
echo "check-unit: ${exposure#→ }"
