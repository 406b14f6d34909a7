#!/usr/bin/env bash
# Usage: profile.sh [--no-default-features] [x86_64-unknown-linux-musl]
#
# Writes scripts/layout/hot-functions.TARGET.FEATURES.txt (default target:
# the host's x86_64-unknown-linux-gnu; FEATURES: default or minimal): every
# function the bridge runs from start to stop, demangled. First those of an
# idle bridge (start, connect, heartbeats), then those of its work (a DM
# answered by the agent, a voice note transcribed, a stranger's pairing
# code, a spooled result, `smolcord status`, the stop). cc-hot-first puts
# them first in the binary's .text in this order (why: its header).
#
# Over TLS, as a bridge reaches Discord (wss:// and https://, a throwaway
# CA). Needs valgrind (callgrind lists every function executed), openssl,
# curl and c++filt; takes ≈ 1 minute. Run it again when the bridge's code
# paths change much; a stale list costs resident memory, never correctness.
set -euo pipefail
cd "$(dirname "$0")/../.."
features=default build=()
if [ "${1:-}" = --no-default-features ]; then
    features=minimal build=(--no-default-features)
    shift
fi
target="${1:-x86_64-unknown-linux-gnu}"
out="scripts/layout/hot-functions.$target.$features.txt"
case "$target" in
    x86_64-unknown-linux-gnu) built=target/release/smolcord ;;
    *) build+=(--target "$target") built="target/$target/release/smolcord" ;;
esac
work="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null || true; [ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT

# The simulator comes from the default build (a minimal one has none).
cargo build --release --bins >&2
cp target/release/smolcord "$work/sim"

# The release build as it ships, but with its symbols (see cc-hot-first), so
# callgrind names every function with the hashes the next link will see.
touch crates/smolcord-app/src/main.rs
SMOLCORD_LAYOUT_SYMBOLS=1 cargo build --release --bins "${build[@]}" >&2
bin="$work/smolcord"
cp "$built" "$bin"
touch crates/smolcord-app/src/main.rs # the next build links again, stripped, with the new list

# A CA and a certificate for 127.0.0.1, valid for a day.
(
    cd "$work"
    ec="-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes"
    # shellcheck disable=SC2086
    openssl req -x509 $ec -keyout ca.key -out ca.pem -subj /CN=profile-ca -days 1 \
        -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign
    # shellcheck disable=SC2086
    openssl req $ec -keyout leaf.key -out leaf.csr -subj /CN=127.0.0.1
    printf 'subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' >leaf.ext
    openssl x509 -req -in leaf.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 1 \
        -extfile leaf.ext -out leaf.pem
) 2>/dev/null

port=$((20000 + RANDOM % 20000))
"$work/sim" sim --listen "127.0.0.1:$port" --heartbeat-ms 1000 \
    --tls-cert "$work/leaf.pem" --tls-key "$work/leaf.key" >"$work/sim.log" 2>&1 &
control="https://127.0.0.1:$port/control"
curl() { command curl --cacert "$work/ca.pem" "$@"; }
for _ in $(seq 100); do curl -sf "$control" >/dev/null && break; sleep 0.1; done

state="$work/state"
mkdir -p "$state"
printf 'ok\n' >"$work/voice.ogg"
cat >"$state/config.json" <<JSON
{"owner_id": "42", "allowed_user_ids": ["43"], "agent_cmd": ["sh", "-c", "cat >/dev/null; echo done"],
 "transcribe_cmd": ["echo", "a transcript"]}
JSON

env -i PATH=/usr/bin:/bin DISCORD_TOKEN=MTEwMDAwMDAwMDAwMDAwMDAwMQ.HDdKgA.c21vbGNvcmQtc2ltdWxhdG9yLW5vLXNlY3JldA SMOLCORD_STATE_DIR="$state" \
    SMOLCORD_CA_FILE="$work/ca.pem" SMOLCORD_GATEWAY_URL="wss://127.0.0.1:$port" \
    SMOLCORD_API_BASE="https://127.0.0.1:$port/api/v10" \
    valgrind --tool=callgrind --demangle=no --callgrind-out-file="$work/callgrind.out" \
    "$bin" run >"$work/bridge.log" 2>&1 &
bridge=$!

wait_for() { # PATTERN FILE: a line of FILE matches, within 120 s
    for _ in $(seq 1200); do grep -q "$1" "$2" && return 0; sleep 0.1; done
    echo "profile.sh: no \"$1\" in $2" >&2
    cat "$2" >&2
    exit 1
}
post() { curl -sf -X POST -H 'Content-Type: application/json' -d "$2" "$control/$1"; }

wait_for "ready as" "$work/bridge.log"
sleep 3 # a few heartbeats and their ACKs
callgrind_control --dump "$bridge" >/dev/null # the idle bridge's functions
# The owner's DM channel, for a spooled result.
channel=$(post dm '{"author_id": "42", "author_name": "owner", "content": "hello"}' |
    grep -o '"channel_id": *"\?[0-9]*' | grep -o '[0-9]*$')
post dm "{\"author_id\": \"42\", \"author_name\": \"owner\", \"voice_ogg_base64\": \"$(base64 -w0 "$work/voice.ogg")\", \"duration_secs\": 2}" >/dev/null
post dm '{"author_id": "7", "author_name": "stranger", "content": "hi"}' >/dev/null
printf '{"channel_id": "%s", "content": "a queued result"}' "$channel" >"$state/spool/results/r1.json.tmp"
mv "$state/spool/results/r1.json.tmp" "$state/spool/results/r1.json"
SMOLCORD_STATE_DIR="$state" SMOLCORD_CA_FILE="$work/ca.pem" "$bin" status >/dev/null || true
sleep 5 # a few heartbeats and their ACKs
kill -TERM "$bridge"
wait "$bridge" || true

# Function names: "fn=(id) name" and "cfn=(id) name" name each one once
# per file; the idle dump is the older file.
names() { sed -n -E 's/^c?fn=\([0-9]+\) (.+)$/\1/p' "$@" | c++filt | grep -v '^0x' | sort -u; }
idle=$(ls -tr "$work"/callgrind.out* | head -1)
names "$idle" >"$work/idle.txt"
names "$work"/callgrind.out* | comm -23 - "$work/idle.txt" >"$work/work.txt"
cat "$work/idle.txt" "$work/work.txt" >"$out"
echo "profile.sh: $(wc -l <"$work/idle.txt") + $(wc -l <"$work/work.txt") functions in $out (logs: $work if KEEP=1)" >&2
