#!/usr/bin/env bash
# twilight-gateway + twilight-http against `smolcord sim`: connect,
# identify, READY and GUILD_CREATE, a DM in, a reply out over REST, a
# voice-note DM and a guild message in, op 7 -> resume on READY's
# resume_gateway_url, a few heartbeats; then the simulator's verdict
# (check.py). The client is an out-of-tree cargo project
# (twilight/Cargo.toml, its own [workspace]) built into
# $CARGO_TARGET_DIR/compat-twilight (default target/compat-twilight), with
# nice and one job: a first build takes minutes. Env: COMPAT_HEARTBEAT_MS,
# COMPAT_BEATS, COMPAT_KEEP_LOGS=1, SMOLCORD_BIN, CARGO_TARGET_DIR.
source "$(dirname "$0")/../lib.sh"
NAME=twilight
VERSION="0.18.0"

(cd "$COMPAT_DIR/twilight" && CARGO_TARGET_DIR="$TARGET/compat-twilight" CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-1}" \
    timeout 3600 nice -n 10 cargo build --quiet --locked) >"$WORK/build.log" 2>&1 ||
    fail "$NAME $VERSION" "cargo build of the twilight client failed"

build_smolcord "$NAME"
start_sim "$NAME"

status=0
timeout 120 "$TARGET/compat-twilight/debug/compat-twilight" \
    --gateway "$GATEWAY_URL" --api "$API_BASE" --control "$CONTROL_URL" --token "$TOKEN" \
    --heartbeat-ms "$HEARTBEAT_MS" --beats "$BEATS" --timeout 30 --result "$WORK/result.json" \
    >"$WORK/bot.log" 2>&1 || status=$?
if [[ $status -ne 0 ]]; then
    fail "$NAME $VERSION" "bot exited $status: $(grep -m1 'FAIL' "$WORK/bot.log" || echo 'see bot.log')"
fi

no_library_warnings "$NAME $VERSION" "$WORK/bot.log"

CHANNEL="$(result_field "$WORK/result.json" channel_id)"
REPLY="$(result_field "$WORK/result.json" reply)"
check "$NAME $VERSION" --channel "$CHANNEL" --reply "$REPLY" --compression zstd-stream --resume ||
    fail_logs "$WORK/bot.log"
