#!/usr/bin/env bash
# hikari (an asyncio library of its own, not a discord.py fork) against
# `smolcord sim`, with the library's defaults: READY (and GUILD_CREATE), a
# DM in and a reply out, a route 429 and a global 429 retried, op 7 ->
# resume, a TCP drop with a DM sent meanwhile (replayed), op 9 both ways, a
# withheld ACK, op 8 -> GUILD_MEMBERS_CHUNK, and two shards in one identify
# bucket (bot.py); then the simulator's verdict (check.py). Needs python3
# (with venv) and PyPI; the venv lives in $CARGO_TARGET_DIR/compat-venv/hikari.
# Env: HIKARI_VERSION (pinned default below), COMPAT_HEARTBEAT_MS,
# COMPAT_BEATS, COMPAT_KEEP_LOGS=1, SMOLCORD_BIN, CARGO_TARGET_DIR.
source "$(dirname "$0")/../lib.sh"
NAME=hikari
VERSION="${HIKARI_VERSION:-2.7.0}"
VENV="$TARGET/compat-venv/hikari"

if ! "$VENV/bin/python" -c "import hikari, sys; sys.exit(hikari.__version__ != '$VERSION')" 2>/dev/null; then
    python3 -m venv "$VENV" || fail "$NAME" "python3 -m venv failed (apt-get install python3-venv?)"
    timeout 600 "$VENV/bin/pip" install --quiet --disable-pip-version-check "hikari==$VERSION" \
        >"$WORK/pip.log" 2>&1 || fail "$NAME" "pip install hikari==$VERSION failed"
fi

build_smolcord "$NAME"
start_sim "$NAME"

status=0
timeout 240 "$VENV/bin/python" "$COMPAT_DIR/hikari/bot.py" --api "$HTTP_BASE/api/v10" \
    --control "$CONTROL_URL" --token "$TOKEN" --result "$WORK/result.json" --beats "$BEATS" \
    >"$WORK/bot.log" 2>&1 || status=$?
if [[ $status -ne 0 ]]; then
    fail "$NAME $VERSION" "bot exited $status: $(grep -m1 ' FAIL ' "$WORK/bot.log" | cut -d' ' -f3- || echo 'see bot.log')"
fi
# hikari logs the faults this run injects (429s, a dropped socket, a
# withheld ACK) at warning level; anything else fails the run.
no_library_warnings "$NAME $VERSION" "$WORK/bot.log" \
    'hikari\.(rest: rate limited|ratelimits: you are being globally rate limited|gateway\.[0-9]+: (failed to communicate with server|connection has not received a HEARTBEAT_ACK))'


CHANNEL="$(result_field "$WORK/result.json" channel_id)"
REPLY="$(result_field "$WORK/result.json" reply)"
check "$NAME $VERSION" --channel "$CHANNEL" --reply "$REPLY" --resume || fail_logs "$WORK/bot.log"
