#!/usr/bin/env bash
# discord.js against `smolcord sim`, with the library's defaults: READY
# (and GUILD_CREATE), a DM in and a reply out, a route 429 and a global
# 429 retried, op 7 -> resume, a TCP drop with a DM sent meanwhile
# (replayed), op 9 both ways, a withheld ACK, op 8 -> GUILD_MEMBERS_CHUNK,
# and two shards in one identify bucket (bot.mjs); then the simulator's
# verdict (check.py). Needs node (>= 18) and npm; the packages live in
# $CARGO_TARGET_DIR/compat-node/discordjs (default target/...).
# Env: DISCORDJS_VERSION (pinned default below), COMPAT_HEARTBEAT_MS,
# COMPAT_BEATS, COMPAT_KEEP_LOGS=1, SMOLCORD_BIN, CARGO_TARGET_DIR.
source "$(dirname "$0")/../lib.sh"
NAME=discord.js
VERSION="${DISCORDJS_VERSION:-14.28.1}"
NODE_DIR="$TARGET/compat-node/discordjs"

command -v node >/dev/null || fail "$NAME" "node is not installed (apt-get install nodejs npm)"
if [[ "$(node -p "require('$NODE_DIR/node_modules/discord.js/package.json').version" 2>/dev/null)" != "$VERSION" ]]; then
    mkdir -p "$NODE_DIR"
    (cd "$NODE_DIR" && timeout 600 npm install --no-audit --no-fund --silent "discord.js@$VERSION") \
        >"$WORK/npm.log" 2>&1 || fail "$NAME" "npm install discord.js@$VERSION failed"
fi

build_smolcord "$NAME"
start_sim "$NAME"

# The bot file is run from the package directory so that its imports resolve.
cp "$COMPAT_DIR/discordjs/bot.mjs" "$NODE_DIR/bot.mjs"
status=0
timeout 240 node "$NODE_DIR/bot.mjs" --api "$HTTP_BASE/api" --control "$CONTROL_URL" \
    --token "$TOKEN" --result "$WORK/result.json" --beats "$BEATS" >"$WORK/bot.log" 2>&1 || status=$?
if [[ $status -ne 0 ]]; then
    fail "$NAME $VERSION" "bot exited $status: $(grep -m1 '^.* FAIL ' "$WORK/bot.log" | cut -d' ' -f2- || echo 'see bot.log')"
fi
no_library_warnings "$NAME $VERSION" "$WORK/bot.log"

CHANNEL="$(result_field "$WORK/result.json" channel_id)"
REPLY="$(result_field "$WORK/result.json" reply)"
STEPS="$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["steps"]))' "$WORK/result.json")"
echo "compat $NAME $VERSION: $STEPS steps passed"
check "$NAME $VERSION" --channel "$CHANNEL" --reply "$REPLY" --resume || fail_logs "$WORK/bot.log"
