#!/usr/bin/env bash
# Builds the twilight peer, the shard benchmark and the reference bot
# (release, smolcord's profile for all), then runs crates/smolcord-app/examples/shards_bench
# with all three columns; extra arguments go to the benchmark.
#
#   scripts/compat/twilight-shards/run.sh                  # 3 rounds, ~40 min
#   scripts/compat/twilight-shards/run.sh --rounds 1 --heartbeat-ms 5000
#   TWILIGHT_SHARDS_BUILD_ONLY=1 scripts/compat/twilight-shards/run.sh
#
# Output of the peer: $CARGO_TARGET_DIR/compat-twilight-shards/ (default
# target/). A first build of the peer takes about 2 min on 2 shared cores
# (nice, one job).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/../../.." && pwd)"
TARGET="${CARGO_TARGET_DIR:-$REPO/target}"
OUT="$TARGET/compat-twilight-shards"

(cd "$HERE" && CARGO_TARGET_DIR="$OUT" CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-1}" \
    nice -n 10 cargo build --quiet --locked --release)
echo "twilight peer: $OUT/release/twilight-shards" >&2
[[ -n "${TWILIGHT_SHARDS_BUILD_ONLY:-}" ]] && exit 0

cd "$REPO"
nice -n 5 cargo build --quiet --release --example shards_bench --example bot
exec "$TARGET/release/examples/shards_bench" \
    --bot "$TARGET/release/examples/bot" \
    --twilight "$OUT/release/twilight-shards" "$@"
