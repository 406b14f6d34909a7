#!/usr/bin/env bash
# Two reference bots (crates/smolcord-app/examples/bot, shards 0-7 and 8-15 of 16) behind the
# real twilight-rs/gateway-queue, against the simulator with
# max_concurrency 4 and Discord's identify rate enforced (op 9 when too
# early): crates/smolcord-app/examples/shards_bench's two-process part with --queue-url. Not in
# CI: it builds a third-party service.
#
#   scripts/compat/gateway-queue/run.sh PATH_TO_GATEWAY_QUEUE_CHECKOUT [bucketed] [bench args]
#
# The checkout is copied, never changed. Modes:
#   plain     (default) the queue without a token: it lets one identify
#             through every 6 s for all shards, whatever the buckets;
#   bucketed  with a token the queue asks GET /gateway/bot for
#             max_concurrency and paces each bucket. It asks discord.com,
#             so the copy gets a one-line change that sends twilight-http
#             to the simulator (DISCORD_API_HOST), which then listens on a
#             fixed address; the queue starts once the simulator is up,
#             and the bots meanwhile find the queue down and retry.
#
# Output: $CARGO_TARGET_DIR/compat-gateway-queue/ (default target/). A first
# build takes about 2 min on 2 shared cores (nice, one job).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/../../.." && pwd)"
TARGET="${CARGO_TARGET_DIR:-$REPO/target}"
OUT="$TARGET/compat-gateway-queue"
SRC="${1:?usage: run.sh PATH_TO_GATEWAY_QUEUE_CHECKOUT [plain|bucketed] [bench args]}"
shift
MODE=plain
if [[ "${1:-}" == plain || "${1:-}" == bucketed ]]; then
    MODE="$1"
    shift
fi
QUEUE_PORT="${QUEUE_PORT:-18092}"
SIM_ADDR="${SIM_ADDR:-127.0.0.1:18093}"

# A copy per mode, so the change below never reaches the checkout.
COPY="$OUT/src-$MODE"
rm -rf "$COPY"
mkdir -p "$COPY"
cp -r "$SRC/Cargo.toml" "$SRC/Cargo.lock" "$SRC/src" "$COPY/"
if [[ "$MODE" == bucketed ]]; then
    sed -i 's|Client::new(token)|Client::builder().token(token).proxy(env::var("DISCORD_API_HOST")?, true).build()|' \
        "$COPY/src/main.rs"
    grep -q DISCORD_API_HOST "$COPY/src/main.rs" ||
        { echo "gateway-queue's main.rs changed: no Client::new(token) to redirect" >&2; exit 1; }
fi
(cd "$COPY" && CARGO_TARGET_DIR="$OUT/target" CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-1}" \
    nice -n 10 cargo build --quiet --release)
QUEUE="$OUT/target/release/twilight-gateway-queue"

cd "$REPO"
nice -n 5 cargo build --quiet --release --example shards_bench --example bot
BENCH=(target/release/examples/shards_bench --bot target/release/examples/bot
    --skip fast,side --queue-url "http://127.0.0.1:$QUEUE_PORT/" "$@")
LOG="$(mktemp "${TMPDIR:-/tmp}/gateway-queue.XXXXXX")"
QUEUE_PID=
trap '[[ -n "$QUEUE_PID" ]] && kill "$QUEUE_PID" 2>/dev/null; echo "queue log: $LOG" >&2' EXIT

if [[ "$MODE" == plain ]]; then
    HOST=127.0.0.1 PORT="$QUEUE_PORT" "$QUEUE" >"$LOG" 2>&1 &
    QUEUE_PID=$!
    "${BENCH[@]}"
    exit
fi

# Bucketed: the simulator must answer the queue's GET /gateway/bot, so the
# benchmark (which starts it) goes first and the queue follows within 30 s.
"${BENCH[@]}" --listen "$SIM_ADDR" &
BENCH_PID=$!
for _ in $(seq 300); do
    (exec 3<>"/dev/tcp/${SIM_ADDR%:*}/${SIM_ADDR#*:}") 2>/dev/null && break
    sleep 0.1
done
DISCORD_TOKEN=MTEwMDAwMDAwMDAwMDAwMDAwMQ.HDdKgA.c21vbGNvcmQtc2ltdWxhdG9yLW5vLXNlY3JldA DISCORD_API_HOST="$SIM_ADDR" HOST=127.0.0.1 PORT="$QUEUE_PORT" \
    "$QUEUE" >"$LOG" 2>&1 &
QUEUE_PID=$!
wait "$BENCH_PID"
