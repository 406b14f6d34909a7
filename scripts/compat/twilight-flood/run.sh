#!/usr/bin/env bash
# Builds the twilight peer (three times: twilight picks its compression at
# compile time, so one binary speaks plain text, one zlib-stream and one
# zstd-stream; the three share one target dir, so their common crates are
# built once), smolcord and
# the flood benchmark (release, smolcord's profile for all three), then runs
# crates/smolcord-app/examples/flood_bench with the peer; extra arguments go to the benchmark.
#
#   scripts/compat/twilight-flood/run.sh                 # every case, 3 rounds
#   scripts/compat/twilight-flood/run.sh --rounds 1 --cases burst
#   TWILIGHT_FLOOD_BUILD_ONLY=1 scripts/compat/twilight-flood/run.sh
#
# Output of the peer: $CARGO_TARGET_DIR/compat-twilight-flood/bin/
# (default target/). Nothing fetched is committed. A first build of the
# peer takes a few minutes on 2 shared cores (nice, one job).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/../../.." && pwd)"
TARGET="${CARGO_TARGET_DIR:-$REPO/target}"
OUT="$TARGET/compat-twilight-flood"
mkdir -p "$OUT/bin"

for variant in plain zlib zstd; do
    features=()
    [[ $variant != plain ]] && features=(--features "$variant")
    (cd "$HERE" && CARGO_TARGET_DIR="$OUT/build" CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-1}" \
        nice -n 10 cargo build --quiet --locked --release "${features[@]}")
    cp "$OUT/build/release/twilight-flood" "$OUT/bin/twilight-flood-$variant"
done
echo "twilight peer: $OUT/bin/twilight-flood-{plain,zlib,zstd}" >&2
[[ -n "${TWILIGHT_FLOOD_BUILD_ONLY:-}" ]] && exit 0

cd "$REPO"
nice -n 5 cargo build --quiet --release --bin smolcord --example flood_bench
exec "$TARGET/release/examples/flood_bench" --twilight "$OUT/bin" "$@"
