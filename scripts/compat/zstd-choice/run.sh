#!/usr/bin/env bash
# Builds the zstd-stream decoder comparison (release, smolcord's profile):
# `decode` without a decoder (the size baseline), with the C library (as
# built by default and `thin`) and with ruzstd; makes a stream of N MESSAGE_CREATEs and decodes it with each,
# ROUNDS times. Output in $CARGO_TARGET_DIR/compat-zstd-choice (default
# target/). Usage: run.sh [N] [LEVEL] [ROUNDS]
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/../../.." && pwd)"
OUT="${CARGO_TARGET_DIR:-$REPO/target}/compat-zstd-choice"
N="${1:-200000}" LEVEL="${2:-3}" ROUNDS="${3:-5}"
mkdir -p "$OUT/bin"
for variant in none c c-thin rust; do
    features=()
    [[ $variant != none ]] && features=(--features "$variant")
    (cd "$HERE" && CARGO_TARGET_DIR="$OUT/build" CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-1}" \
        nice -n 10 cargo build --quiet --locked --release --bin decode "${features[@]}")
    cp "$OUT/build/release/decode" "$OUT/bin/decode-$variant"
done
(cd "$HERE" && CARGO_TARGET_DIR="$OUT/build" nice -n 10 cargo build --quiet --locked --release --bin make-stream --features c)
"$OUT/build/release/make-stream" "$OUT/stream" "$N" "$LEVEL"
for variant in none c c-thin rust; do
    echo "decode-$variant: $(stat -c %s "$OUT/bin/decode-$variant") bytes"
done
for round in $(seq "$ROUNDS"); do
    for variant in c c-thin rust; do
        echo "round $round $variant: $("$OUT/bin/decode-$variant" "$OUT/stream")"
    done
done
