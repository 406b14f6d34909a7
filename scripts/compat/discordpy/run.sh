#!/usr/bin/env bash
# discord.py against `smolcord sim`: connect, identify, READY (and
# GUILD_CREATE), a DM in, a reply out over REST (`channel.send`), a
# voice-note DM and a guild message in, a route 429 and a global 429
# (waited out, retried), op 7 -> resume on READY's
# resume_gateway_url, a few heartbeats; then the simulator's verdict
# (check.py). Needs python3 (with venv) and PyPI; the venv lives in
# $CARGO_TARGET_DIR/compat-venv/discordpy (default target/...).
# Env: DISCORDPY_VERSION (pinned default below), COMPAT_HEARTBEAT_MS,
# COMPAT_BEATS, COMPAT_KEEP_LOGS=1, SMOLCORD_BIN, CARGO_TARGET_DIR.
source "$(dirname "$0")/../lib.sh"
NAME=discord.py
VERSION="${DISCORDPY_VERSION:-2.7.1}"
# discord.py asks for zlib-stream, or zstd-stream when the optional
# `zstandard` package is installed: COMPAT_DISCORDPY_ZSTD=1 (what
# ../discordpy-zstd/run.sh sets) runs it that way, from a venv of its own.
if [[ -n "${COMPAT_DISCORDPY_ZSTD:-}" ]]; then
    NAME="discord.py+zstandard"
    VENV="$TARGET/compat-venv/discordpy-zstd"
    PACKAGES=("discord.py==$VERSION" "zstandard")
    COMPRESSION=zstd-stream
else
    VENV="$TARGET/compat-venv/discordpy"
    PACKAGES=("discord.py==$VERSION")
    COMPRESSION=zlib-stream
fi

if ! "$VENV/bin/python" -c "import discord, sys; sys.exit(discord.__version__ != '$VERSION')" 2>/dev/null; then
    python3 -m venv "$VENV" || fail "$NAME" "python3 -m venv failed (apt-get install python3-venv?)"
    timeout 600 "$VENV/bin/pip" install --quiet --disable-pip-version-check "${PACKAGES[@]}" \
        >"$WORK/pip.log" 2>&1 || fail "$NAME" "pip install ${PACKAGES[*]} failed"
fi

build_smolcord "$NAME"
start_sim "$NAME"

status=0
timeout 120 "$VENV/bin/python" "$COMPAT_DIR/discordpy/bot.py" \
    --gateway "$GATEWAY_URL" --api "$API_BASE" --control "$CONTROL_URL" --token "$TOKEN" \
    --heartbeat-ms "$HEARTBEAT_MS" --beats "$BEATS" --result "$WORK/result.json" \
    >"$WORK/bot.log" 2>&1 || status=$?
if [[ $status -ne 0 ]]; then
    fail "$NAME $VERSION" "bot exited $status: $(grep -m1 'FAIL' "$WORK/bot.log" || echo 'see bot.log')"
fi

# The two 429s the bot has injected are logged as warnings by discord.py;
# check.py makes sure they happened and were retried.
no_library_warnings "$NAME $VERSION" "$WORK/bot.log" \
    '(PyNaCl|davey) is not installed, voice will NOT be supported|We are being rate limited\. (POST|GET) .* responded with 429\. Retrying in|Global rate limit has been hit\. Retrying in'

CHANNEL="$(result_field "$WORK/result.json" channel_id)"
REPLY="$(result_field "$WORK/result.json" reply)"
check "$NAME $VERSION" --channel "$CHANNEL" --reply "$REPLY" --compression "$COMPRESSION" --resume \
    --rate-limited 2 ||
    fail_logs "$WORK/bot.log"
