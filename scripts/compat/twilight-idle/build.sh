#!/usr/bin/env bash
# Builds the twilight idle peer (release, smolcord's profile) into
# $CARGO_TARGET_DIR/compat-twilight-idle (default target/ of the repo),
# with nice and one job; a first build takes a few minutes. Prints the
# binary's path, which `footprint --twilight PATH` takes.
set -euo pipefail
DIR="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$DIR/../../.." && pwd)"
TARGET="${CARGO_TARGET_DIR:-$REPO/target}/compat-twilight-idle"
(cd "$DIR" && CARGO_TARGET_DIR="$TARGET" CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-1}" \
    timeout 3600 nice -n 10 cargo build --quiet --release --locked) >&2
echo "$TARGET/release/compat-twilight-idle"
