# Shared by the scripts/compat/*/run.sh scripts (sourced, not run).
#
# Starts `smolcord sim` on an ephemeral port, exposes its URLs, and stops
# it (and anything else registered) on exit. Every wait here is bounded.

set -euo pipefail

COMPAT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$COMPAT_DIR/../.." && pwd)"
TARGET="${CARGO_TARGET_DIR:-$REPO/target}"
# Short on purpose: a few intervals pass in a few seconds.
HEARTBEAT_MS="${COMPAT_HEARTBEAT_MS:-1000}"
# How many heartbeats each client must send on one connection.
BEATS="${COMPAT_BEATS:-4}"
# The token `smolcord sim` accepts: read from what it prints (start_sim).
TOKEN=""

WORK="$(mktemp -d "${TMPDIR:-/tmp}/smolcord-compat.XXXXXX")"
PIDS=()

compat_cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in "${PIDS[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
    if [[ -n "${COMPAT_KEEP_LOGS:-}" ]]; then
        echo "logs kept in $WORK" >&2
    else
        rm -rf "$WORK"
    fi
}
trap compat_cleanup EXIT

# fail NAME REASON: the one-line verdict for a failure, then exit 1.
fail() {
    echo "compat $1: FAIL — $2"
    if [[ -d "$WORK" ]]; then
        local f
        for f in "$WORK"/*.log; do
            [[ -f "$f" ]] || continue
            echo "--- last lines of $(basename "$f")" >&2
            tail -n 25 "$f" >&2
        done
    fi
    exit 1
}

# Builds smolcord (debug, default features) unless SMOLCORD_BIN is set.
build_smolcord() {
    if [[ -n "${SMOLCORD_BIN:-}" ]]; then
        return
    fi
    (cd "$REPO" && nice -n 10 cargo build --quiet --bin smolcord) || fail "${1:-sim}" "cargo build of smolcord failed"
    SMOLCORD_BIN="$TARGET/debug/smolcord"
}

# Starts the simulator on 127.0.0.1:0 and sets GATEWAY_URL, API_BASE,
# CONTROL_URL, HTTP_BASE and TOKEN from what it prints. Arguments after the
# name go to `smolcord sim` (e.g. --max-concurrency 2).
start_sim() {
    local name="$1"
    "$SMOLCORD_BIN" sim --listen 127.0.0.1:0 --heartbeat-ms "$HEARTBEAT_MS" "${@:2}" \
        >"$WORK/sim.out" 2>"$WORK/sim.log" &
    PIDS+=("$!")
    local i
    for i in $(seq 1 100); do
        if grep -q '^  control ' "$WORK/sim.out" 2>/dev/null; then
            break
        fi
        kill -0 "${PIDS[-1]}" 2>/dev/null || fail "$name" "smolcord sim exited at start"
        sleep 0.1
    done
    GATEWAY_URL="$(awk '$1 == "gateway" {print $2}' "$WORK/sim.out")"
    API_BASE="$(awk '$1 == "REST" {print $2}' "$WORK/sim.out")"
    CONTROL_URL="$(awk '$1 == "control" {print $2}' "$WORK/sim.out")"
    TOKEN="$(awk '$1 == "token" {print $2}' "$WORK/sim.out")"
    [[ -n "$GATEWAY_URL" && -n "$API_BASE" && -n "$CONTROL_URL" && -n "$TOKEN" ]] ||
        fail "$name" "smolcord sim printed no URLs within 10 s"
    HTTP_BASE="${API_BASE%/api/v10}"
    export GATEWAY_URL API_BASE CONTROL_URL HTTP_BASE TOKEN
}

# fail_logs LOG...: after a verdict line already printed, show the logs; exit 1.
fail_logs() {
    local f
    for f in "$@" "$WORK/sim.log"; do
        [[ -f "$f" ]] || continue
        echo "--- last lines of $(basename "$f")" >&2
        tail -n 25 "$f" >&2
    done
    exit 1
}

# result_field FILE KEY: one field of a client's result JSON.
result_field() {
    python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"
}

# no_library_warnings NAME LOG [IGNORE_REGEX]: a library that logged a
# warning or error (an event it could not parse, a close it did not expect)
# fails the run, even if the steps succeeded.
no_library_warnings() {
    local lines
    lines="$(grep -E '(^|[ :])(WARN|WARNING|ERROR)[ :]' "$2" | grep -Ev "${3:-^$}" || true)"
    if [[ -n "$lines" ]]; then
        echo "$lines" | head -n 5 >&2
        fail "$1" "the library logged $(echo "$lines" | wc -l) warning/error line(s): $(echo "$lines" | head -n 1 | cut -c1-200)"
    fi
}

# check NAME [extra check.py args]: the verdict from the simulator's view.
check() {
    python3 "$COMPAT_DIR/check.py" --name "$1" --control "$CONTROL_URL" --beats "$BEATS" "${@:2}"
}
