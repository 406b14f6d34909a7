#!/usr/bin/env bash
# Builds smolcord for small hosts and runs each cross-built binary under
# qemu-user against a native simulator.
#
#   scripts/cross-check.sh            install what is missing, build, run
#   SKIP_INSTALL=1 scripts/cross-check.sh
#   TARGETS="aarch64-unknown-linux-musl" scripts/cross-check.sh
#
# Targets: x86_64-unknown-linux-musl (static; the container image),
# aarch64-unknown-linux-musl (static; Pi 3/4/5, 64-bit OS),
# armv7-unknown-linux-gnueabihf (32-bit Pi OS; glibc >= 2.34 on the Pi,
# i.e. bookworm — rustup has no armv7 musl std to install here).
#
# For each target: release builds (minimal, then default), their sizes,
# `--help` under qemu; the static x86_64 binary in an empty root as uid
# 65534 with an empty environment (what FROM scratch gives it); then the
# real thing: native `smolcord sim --heartbeat-ms 500`, the target's
# `smolcord run` under qemu connects, gets READY and heartbeats (read from the
# simulator's /control/stats), `smolcord status` (under qemu) says healthy,
# and SIGTERM ends it with exit 0 within 5 s. Every wait is bounded; every
# process started here is killed on exit. Not run in CI: it builds seven
# release binaries, about 16 min on 2 cores with nothing installed.
set -euo pipefail
cd "$(dirname "$0")/.."

TARGETS=${TARGETS:-"x86_64-unknown-linux-musl aarch64-unknown-linux-musl armv7-unknown-linux-gnueabihf"}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
HEARTBEAT_MS=${HEARTBEAT_MS:-500}
BEATS=${BEATS:-3}
NICE=(nice -n 10)

log() { printf 'cross-check: %s\n' "$*" >&2; }
die() { log "FAIL: $*"; exit 1; }

work=$(mktemp -d)
pids=()
cleanup() {
    local pid
    for pid in "${pids[@]}"; do
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$work"
}
trap cleanup EXIT

# --- tools -----------------------------------------------------------------

qemu_for() {
    case $1 in
        x86_64-*) echo "" ;;
        aarch64-*-gnu) echo "qemu-aarch64 -L /usr/aarch64-linux-gnu" ;;
        aarch64-*) echo "qemu-aarch64" ;;
        armv7-*-gnueabihf) echo "qemu-arm -L /usr/arm-linux-gnueabihf" ;;
        armv7-*) echo "qemu-arm" ;;
        *) die "no qemu known for $1" ;;
    esac
}

install_tools() {
    local missing=() installed
    installed=$(rustup target list --installed)
    for target in $TARGETS; do
        grep -qx "$target" <<<"$installed" || missing+=("$target")
    done
    if ((${#missing[@]})); then
        log "rustup target add ${missing[*]}"
        rustup target add "${missing[@]}"
    fi
    local need=() packages=()
    command -v qemu-aarch64 >/dev/null || need+=(qemu-user)
    command -v musl-gcc >/dev/null || need+=(musl-tools)
    command -v file >/dev/null || need+=(file)
    for target in $TARGETS; do
        case $target in
            aarch64-*)
                command -v aarch64-linux-gnu-gcc >/dev/null || need+=(gcc-aarch64-linux-gnu)
                [[ -d /usr/aarch64-linux-gnu/lib ]] || need+=(libc6-dev-arm64-cross) ;;
            armv7-*)
                command -v arm-linux-gnueabihf-gcc >/dev/null || need+=(gcc-arm-linux-gnueabihf)
                [[ -d /usr/arm-linux-gnueabihf/lib ]] || need+=(libc6-dev-armhf-cross) ;;
        esac
    done
    # Deduplicate.
    mapfile -t packages < <(printf '%s\n' "${need[@]}" | sort -u | sed '/^$/d')
    if ((${#packages[@]})); then
        log "apt-get install ${packages[*]}"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
    fi
}

# --- HTTP without curl (bash /dev/tcp) --------------------------------------

# http_get HOST PORT PATH: prints the response body.
http_get() {
    local response
    exec 3<>"/dev/tcp/$1/$2" || return 1
    printf 'GET %s HTTP/1.1\r\nHost: %s:%s\r\nConnection: close\r\n\r\n' "$3" "$1" "$2" >&3
    response=$(timeout 5 cat <&3) || true
    exec 3<&- 3>&-
    printf '%s' "${response#*$'\r\n\r\n'}"
}

# totals_number NAME: `"NAME":N` from the `"totals":{...}` object of
# /control/stats on stdin (key order is not fixed), or 0. Only the object's
# own keys count: it holds nested objects too (`identifies_by_bucket`), so
# it is read to its matching brace with those left out, not to the first `}`.
totals_number() {
    awk '{
        i = index($0, "\"totals\":{"); if (!i) next
        s = substr($0, i + 9); depth = 0; own = ""
        for (j = 1; j <= length(s); j++) {
            c = substr(s, j, 1)
            if (c == "{") { depth++; continue }
            if (c == "}") { if (--depth == 0) break; continue }
            if (depth == 1) own = own c
        }
        print own
    }' | grep -o "\"$1\":[0-9]*" | head -1 | cut -d: -f2 | grep . || echo 0
}

# --- steps -------------------------------------------------------------------

# build TARGET [CARGO_FLAGS...]
build() {
    local target=$1; shift
    log "building $target (release${*:+ $*})"
    "${NICE[@]}" cargo build --release --locked -p smolcord-app --target "$target" "$@" 2>"$work/build-$target.log" \
        || { tail -30 "$work/build-$target.log" >&2; die "build of $target"; }
}

# wait_for SECONDS COMMAND...: polls every 0.2 s until COMMAND succeeds.
wait_for() {
    local deadline=$((SECONDS + $1)); shift
    until "$@"; do
        ((SECONDS < deadline)) || return 1
        sleep 0.2
    done
}

sim_pid=
# sim_ready FILE: the URLs are printed, or the simulator has exited.
sim_ready() { grep -qs '/control' "$1" || ! kill -0 "$sim_pid" 2>/dev/null; }
sim_host=
sim_port=
gateway_url=
api_base=

start_sim() {
    local native=$CARGO_TARGET_DIR/release/smolcord out=$work/sim.out
    log "building the native simulator (release)"
    "${NICE[@]}" cargo build --release --locked -p smolcord-app 2>"$work/build-native.log" \
        || { tail -30 "$work/build-native.log" >&2; die "native build"; }
    # Targets identify one after another, seconds apart: identify pacing
    # (on by default in `smolcord sim`) is not what this checks.
    RUST_LOG=warn "$native" sim --listen 127.0.0.1:0 --heartbeat-ms "$HEARTBEAT_MS" \
        --identify-pacing off >"$out" 2>"$work/sim.err" &
    sim_pid=$!
    pids+=("$sim_pid")
    # It prints its URLs once listening (or exits at once if it cannot).
    wait_for 10 sim_ready "$out" || true
    if ! grep -q '/control' "$out"; then
        if grep -q 'not available' "$work/sim.err" "$out" 2>/dev/null; then
            log "PENDING: this build has no \`smolcord sim\` yet; only --help was run under qemu"
            return 1
        fi
        cat "$out" "$work/sim.err" >&2
        die "the simulator did not print its URLs within 10 s"
    fi
    gateway_url=$(grep -o 'ws://[^ ]*' "$out" | head -1)
    api_base=$(grep -o 'http://[^ ]*/api/v10' "$out" | head -1)
    local control
    control=$(grep -o 'http://[^ ]*/control' "$out" | head -1)
    sim_token=$(awk '$1 == "token" {print $2}' "$out")
    [[ -n $gateway_url && -n $api_base && -n $control && -n $sim_token ]] || die "cannot read the simulator's URLs from: $(cat "$out")"
    sim_host=${control#http://}; sim_host=${sim_host%%/*}
    sim_port=${sim_host##*:}; sim_host=${sim_host%:*}
    log "simulator: gateway $gateway_url, REST $api_base, control $control"
}

stats() { http_get "$sim_host" "$sim_port" /control/stats; }

# Waits until the simulator has counted at least $2 heartbeats and $1
# sessions in total.
enough_beats() {
    local body
    body=$(stats) || return 1
    (($(totals_number sessions_started <<<"$body") >= $1)) &&
        (($(totals_number heartbeats <<<"$body") >= $2))
}

# What the FROM-scratch image gives the binary: an empty root holding only
# /smolcord and /state (0700, uid 65534), uid/gid 65534, an empty
# environment. chroot needs root; elsewhere this step is skipped.
scratch_root=
scratch_check() {
    if [[ $(id -u) != 0 ]]; then
        log "not root: skipping the empty-root (FROM scratch) check"
        return
    fi
    scratch_root=$work/scratch
    mkdir -p "$scratch_root/state"
    cp "$1" "$scratch_root/smolcord"
    chown 65534:65534 "$scratch_root/state"
    chmod 0700 "$scratch_root/state"
    local out=$work/scratch.out rc=0 chroot
    chroot=$(command -v chroot)
    env -i "$chroot" --userspec=65534:65534 "$scratch_root" /smolcord --help >"$out" 2>&1 \
        || die "scratch: --help in an empty root as 65534 failed: $(cat "$out")"
    env -i SMOLCORD_STATE_DIR=/state "$chroot" --userspec=65534:65534 "$scratch_root" /smolcord status >"$out" 2>&1 || rc=$?
    if ((rc != 1)) || ! grep -q 'no status yet' "$out"; then
        die "scratch: status before any run should say 'no status yet', exit 1; got exit $rc: $(cat "$out")"
    fi
    log "scratch: static binary runs in an empty root as 65534 with an empty environment (--help; status: exit 1, no status yet)"
}

# launcher TARGET: sets `prefix` (the command line before the binary),
# `program` and `state` as the program sees them. x86_64 musl runs in the
# scratch root when there is one, the others under qemu.
launcher() {
    if [[ $1 == x86_64-unknown-linux-musl && -n $scratch_root ]]; then
        prefix=("$(command -v chroot)" --userspec=65534:65534 "$scratch_root")
        program=/smolcord
        state=/state
    else
        read -r -a prefix <<<"$(qemu_for "$1")"
        # env -i clears PATH: name the emulator by its full path.
        ((${#prefix[@]} == 0)) || prefix[0]=$(command -v "${prefix[0]}")
        program=$CARGO_TARGET_DIR/$1/release/smolcord
        state=$work/state-$1
        mkdir -p "$state"
    fi
}

client_pid=
# connected_or_gone SESSIONS BEATS: enough_beats, or the client has exited.
connected_or_gone() { enough_beats "$@" || ! kill -0 "$client_pid" 2>/dev/null; }

run_against_sim() {
    local target=$1 before_sessions before_beats pid rc
    local prefix program state
    launcher "$target"
    local body
    body=$(stats)
    before_sessions=$(totals_number sessions_started <<<"$body")
    before_beats=$(totals_number heartbeats <<<"$body")
    # An empty environment but for what `run` needs (as in the image).
    env -i DISCORD_TOKEN="$sim_token" SMOLCORD_GATEWAY_URL="$gateway_url" \
        SMOLCORD_API_BASE="$api_base" SMOLCORD_STATE_DIR="$state" RUST_LOG=info \
        "${prefix[@]}" "$program" run >"$work/run-$target.log" 2>&1 &
    pid=$!
    pids+=("$pid")
    client_pid=$pid
    wait_for 30 connected_or_gone $((before_sessions + 1)) $((before_beats + BEATS)) || true
    if ! enough_beats $((before_sessions + 1)) $((before_beats + BEATS)); then
        if ! kill -0 "$pid" 2>/dev/null && grep -q 'not available' "$work/run-$target.log"; then
            log "PENDING: this build has no \`smolcord run\` yet"
            return 2
        fi
        tail -20 "$work/run-$target.log" >&2
        die "$target: no READY + $BEATS heartbeats within 30 s"
    fi
    log "$target: connected, READY, $BEATS+ heartbeats ($HEARTBEAT_MS ms interval)"
    # status.json is written at most once per heartbeat: give it two.
    if ! wait_for 10 env -i SMOLCORD_STATE_DIR="$state" "${prefix[@]}" "$program" status >"$work/status-$target.out" 2>&1; then
        cat "$work/status-$target.out" >&2
        die "$target: \`smolcord status\` did not report healthy within 10 s"
    fi
    log "$target: \`smolcord status\` exit 0 (healthy)"
    kill -TERM "$pid"
    rc=0
    if ! wait_for 5 bash -c "! kill -0 $pid 2>/dev/null"; then
        die "$target: still running 5 s after SIGTERM"
    fi
    wait "$pid" || rc=$?
    ((rc == 0)) || { tail -20 "$work/run-$target.log" >&2; die "$target: exit $rc after SIGTERM (want 0)"; }
    log "$target: SIGTERM -> exit 0"
}

main() {
    [[ ${SKIP_INSTALL:-} == 1 ]] || install_tools
    local target binary qemu
    declare -A sizes minimal_sizes
    for target in $TARGETS; do
        # The minimal build first, so the default one is left in place.
        build "$target" --no-default-features
        binary=$CARGO_TARGET_DIR/$target/release/smolcord
        minimal_sizes[$target]=$(stat -c %s "$binary")
        build "$target"
        sizes[$target]=$(stat -c %s "$binary")
        qemu=$(qemu_for "$target")
        # shellcheck disable=SC2086
        env -i $qemu "$binary" --help >"$work/help.out" || die "$target: --help under qemu failed"
        grep -q 'smolcord' "$work/help.out" || die "$target: --help printed no usage"
        log "$target: --help runs${qemu:+ under ${qemu%% *}}"
    done

    mib() { awk "BEGIN { printf \"%.2f\", $1 / 1048576 }"; }
    printf '\n%-32s %10s %8s %10s %8s  %s\n' target default MiB minimal MiB linkage
    for target in $TARGETS; do
        binary=$CARGO_TARGET_DIR/$target/release/smolcord
        printf '%-32s %10d %8s %10d %8s  %s\n' "$target" \
            "${sizes[$target]}" "$(mib "${sizes[$target]}")" \
            "${minimal_sizes[$target]}" "$(mib "${minimal_sizes[$target]}")" \
            "$(file -b "$binary" | grep -o 'static-pie linked\|statically linked\|dynamically linked' | head -1)"
    done
    echo

    if [[ " $TARGETS " == *" x86_64-unknown-linux-musl "* ]]; then
        scratch_check "$CARGO_TARGET_DIR/x86_64-unknown-linux-musl/release/smolcord"
    fi

    if start_sim; then
        local rc
        for target in $TARGETS; do
            rc=0
            run_against_sim "$target" || rc=$?
            ((rc != 2)) || break
            ((rc == 0)) || exit "$rc"
        done
    fi
    log "OK"
}

main "$@"
