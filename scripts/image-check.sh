#!/usr/bin/env bash
# Checks the container image for real: builds the Dockerfile's final stage
# (verbatim) around a static musl binary built on this host, runs it in
# podman or Docker against the simulator on the host, and checks what the
# README promises about it.
#
#   scripts/image-check.sh                install what is missing, build, check
#   SKIP_INSTALL=1 scripts/image-check.sh
#   ENGINE=docker scripts/image-check.sh  (default: podman if installed, else
#                                          a running Docker, else podman from apt)
#
# Why not `docker build .`: the Dockerfile's builder stage pulls
# rust:*-alpine, which needs a registry; this script needs none. The binary
# is built with the Dockerfile's own CARGO_FLAGS (read from it), for
# x86_64-unknown-linux-musl as scripts/cross-check.sh builds it.
#
# Checks, each printed PASS or FAIL (exit 1 if any failed), every container
# run with the hardened flags (--read-only --cap-drop ALL --security-opt
# no-new-privileges --memory 16m) on the host network:
#   READY        the bridge gets READY from the simulator
#   dm           a DM from the owner is answered (the agent is the binary's
#                own `demo-agent`, a subprocess inside the container)
#   uid          the process runs as uid 65534
#   healthy      the image's HEALTHCHECK (`smolcord status`) passes
#   unhealthy    ... and fails once the gateway is stopped (SIGSTOP)
#   stop         `stop` ends it with exit 0 within 3 s
#   resume       a new container on the same volume resumes the session
#                (no new identify)
# Not run in CI. From a fresh clone on 2 shared cores about 7 min, nearly
# all of it the two cargo builds (a release musl build, a debug host build),
# plus apt and rustup the first time; with the builds warm, about 10 s.
# The image is kept (localhost/smolcord:image-check); containers, the
# volume and the simulator are removed.
set -euo pipefail
cd "$(dirname "$0")/.."

started=$SECONDS
TARGET=x86_64-unknown-linux-musl
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
HEARTBEAT_MS=${HEARTBEAT_MS:-500}
IMAGE=${IMAGE:-localhost/smolcord:image-check}
HARDENED=(--read-only --cap-drop ALL --security-opt no-new-privileges --memory 16m)
OWNER_ID=424242
NICE=(nice -n 10)
# The Dockerfile's build flags, so the image checked is the one it builds.
read -r -a CARGO_FLAGS <<<"$(sed -n 's/^ARG CARGO_FLAGS="\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' Dockerfile)"

log() { printf 'image-check: %s\n' "$*" >&2; }
die() { log "FAIL: $*"; exit 1; }

failed=0
pass() { printf 'PASS  %-10s %s\n' "$1" "$2"; }
fail() { printf 'FAIL  %-10s %s\n' "$1" "$2"; failed=$((failed + 1)); }

work=$(mktemp -d)
chmod 0755 "$work"
suffix=$$
volume=smolcord-image-check-$suffix
containers=()
sim_pid=
engine=

cleanup() {
    local c
    if [[ -n $engine ]]; then
        for c in "${containers[@]}"; do
            "$engine" rm -f "$c" >/dev/null 2>&1 || true
        done
        "$engine" volume rm -f "$volume" >/dev/null 2>&1 || true
    fi
    if [[ -n $sim_pid ]]; then
        kill -CONT "$sim_pid" 2>/dev/null || true
        kill -KILL "$sim_pid" 2>/dev/null || true
        wait "$sim_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

now_ms() { date +%s%3N; }

# wait_for SECONDS COMMAND...: polls every 0.2 s until COMMAND succeeds.
wait_for() {
    local deadline=$((SECONDS + $1)); shift
    until "$@"; do
        ((SECONDS < deadline)) || return 1
        sleep 0.2
    done
}

# --- tools -----------------------------------------------------------------

apt_install() {
    [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null \
        || die "missing: $*; install them (not root, or no apt-get here)"
    log "apt-get install $*"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

pick_engine() {
    if [[ -n ${ENGINE:-} ]]; then
        engine=$ENGINE
    elif command -v podman >/dev/null; then
        engine=podman
    elif command -v docker >/dev/null && docker info >/dev/null 2>&1; then
        engine=docker
    elif [[ ${SKIP_INSTALL:-} != 1 ]]; then
        apt_install podman runc
        engine=podman
    else
        die "neither podman nor a running Docker daemon"
    fi
    command -v "$engine" >/dev/null || die "$engine is not installed"
    if [[ $engine == podman ]]; then
        # crun (podman's default on Debian) refuses some hosts' hybrid
        # cgroup layout, and podman's default file limit (1048576) is
        # above what root may set on some VMs: use runc, and the limits
        # this shell has.
        command -v runc >/dev/null || [[ ${SKIP_INSTALL:-} == 1 ]] || apt_install runc
        local nofile nproc
        nofile=$(ulimit -Hn); [[ $nofile == unlimited ]] && nofile=1048576
        nproc=$(ulimit -Hu); [[ $nproc == unlimited || $nproc -gt 32768 ]] && nproc=32768
        {
            if command -v runc >/dev/null; then
                printf '[engine]\nruntime = "runc"\n'
            fi
            printf '[containers]\ndefault_ulimits = ["nofile=%s:%s", "nproc=%s:%s"]\n' \
                "$nofile" "$nofile" "$nproc" "$nproc"
        } >"$work/containers.conf"
        export CONTAINERS_CONF=$work/containers.conf
    fi
    log "engine: $("$engine" --version)"
}

install_tools() {
    local need=()
    command -v musl-gcc >/dev/null || need+=(musl-tools)
    command -v curl >/dev/null || need+=(curl)
    ((${#need[@]} == 0)) || apt_install "${need[@]}"
    rustup target list --installed | grep -qx "$TARGET" || {
        log "rustup target add $TARGET"
        rustup target add "$TARGET"
    }
}

# --- build -----------------------------------------------------------------

build_binaries() {
    log "building the image's binary: $TARGET, release, ${CARGO_FLAGS[*]:-default features}"
    "${NICE[@]}" cargo build --release --locked -p smolcord-app --target "$TARGET" "${CARGO_FLAGS[@]}" \
        2>"$work/build-musl.log" || { tail -30 "$work/build-musl.log" >&2; die "build of $TARGET"; }
    log "building the simulator for the host (debug: it only serves)"
    "${NICE[@]}" cargo build --locked --bin smolcord 2>"$work/build-sim.log" \
        || { tail -30 "$work/build-sim.log" >&2; die "build of the simulator"; }
}

# The Dockerfile's final stage, verbatim, on top of a stage that holds the
# host-built binary where the Dockerfile's builder leaves it (/out).
build_image() {
    local ctx=$work/ctx binary=$CARGO_TARGET_DIR/$TARGET/release/smolcord
    mkdir -p "$ctx/state"
    cp "$binary" "$ctx/smolcord"
    if command -v readelf >/dev/null && readelf -d "$ctx/smolcord" | grep -q NEEDED; then
        die "$binary is dynamically linked: FROM scratch has no loader"
    fi
    {
        echo "FROM scratch AS build"
        echo "COPY smolcord /out/smolcord"
        echo "COPY state /out/state"
        awk '/^FROM scratch/ { final = 1 } final' Dockerfile
    } >"$ctx/Dockerfile"
    grep -q HEALTHCHECK "$ctx/Dockerfile" || die "no final FROM scratch stage with a HEALTHCHECK in Dockerfile"
    local format=()
    # podman's default (OCI) format has no HEALTHCHECK: it would be dropped
    # with only a warning.
    [[ $engine == podman ]] && format=(--format docker)
    log "building $IMAGE from the Dockerfile's final stage"
    "$engine" build "${format[@]}" -q -t "$IMAGE" -f "$ctx/Dockerfile" "$ctx" >"$work/image-build.log" 2>&1 \
        || { cat "$work/image-build.log" >&2; die "image build"; }
    local bytes
    bytes=$("$engine" image inspect --format '{{.Size}}' "$IMAGE")
    log "image $IMAGE: $bytes bytes ($(awk "BEGIN { printf \"%.2f\", $bytes / 1048576 }") MiB); binary $(stat -c %s "$binary") bytes"
}

# --- the simulator and its control API ---------------------------------------

control=
gateway_url=
api_base=
token=

start_sim() {
    local out=$work/sim.out
    RUST_LOG=warn "$CARGO_TARGET_DIR/debug/smolcord" sim --listen 127.0.0.1:0 \
        --heartbeat-ms "$HEARTBEAT_MS" >"$out" 2>"$work/sim.err" &
    sim_pid=$!
    wait_for 15 grep -qs '/control' "$out" || { cat "$out" "$work/sim.err" >&2; die "the simulator printed no URLs within 15 s"; }
    gateway_url=$(grep -o 'ws://[^ ]*' "$out" | head -1)
    api_base=$(grep -o 'http://[^ ]*/api/v10' "$out" | head -1)
    control=$(grep -o 'http://[^ ]*/control' "$out" | head -1)
    # The simulator takes only tokens shaped like Discord's, and prints its own.
    token=$(awk '$1 == "token" { print $2; exit }' "$out")
    log "simulator: gateway $gateway_url (heartbeat interval $HEARTBEAT_MS ms)"
}

# total NAME: the simulator's `totals.NAME` (0 if it cannot be read). The
# object holds nested ones (`identifies_by_bucket`): only its own keys count.
total() {
    curl -sf --max-time 5 "$control/stats" | awk '{
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

# --- containers ----------------------------------------------------------------

# run_container NAME: starts the image on the host network against the
# simulator, with the hardened flags and the state volume.
run_container() {
    containers+=("$1")
    # Without systemd, podman logs that it cannot add the health-check
    # timer (health checks then run only when asked): kept out of the way.
    "$engine" run -d --name "$1" --network host "${HARDENED[@]}" \
        -e DISCORD_TOKEN="$token" \
        -e SMOLCORD_GATEWAY_URL="$gateway_url" -e SMOLCORD_API_BASE="$api_base" \
        -e SMOLCORD_CONFIG=/config.json -v "$work/config.json:/config.json:ro" \
        -v "$volume:/state" "$IMAGE" >/dev/null 2>>"$work/engine.err" \
        || { cat "$work/engine.err" >&2; return 1; }
}

logs_say() { "$engine" logs "$1" 2>&1 | grep -q "$2"; }
exited() { [[ $("$engine" inspect --format '{{.State.Running}}' "$1") == false ]]; }
logs_say_or_exited() { logs_say "$1" "$2" || exited "$1"; }

# healthy NAME: the image's health check passes now (its output, for a
# FAIL line, in $work/health.out).
healthy() {
    case $engine in
        podman) podman healthcheck run "$1" >"$work/health.out" 2>&1 ;;
        # Docker has no "run the check now": run the HEALTHCHECK's command.
        *) docker exec "$1" /smolcord status >"$work/health.out" 2>&1 ;;
    esac
}
# unhealthy NAME: the check ran and said unhealthy (not: there is no check).
unhealthy() { ! healthy "$1" && ! grep -qi 'no defined healthcheck\|not found\|no such' "$work/health.out"; }
health_said() { tr '\n' ' ' <"$work/health.out" | cut -c1-160; }

container_pid() { "$engine" inspect --format '{{.State.Pid}}' "$1"; }

# The process's uid as the container sees it (rootless podman maps ids).
container_uid() {
    local pid
    pid=$(container_pid "$1")
    if [[ $engine == podman && $(id -u) != 0 ]]; then
        podman unshare awk '/^Uid:/ { print $2 }' "/proc/$pid/status"
    else
        awk '/^Uid:/ { print $2 }' "/proc/$pid/status"
    fi
}

answered() {
    curl -sf --max-time 5 "$control/messages?channel_id=$1" | grep -q 'you said: «hello from image-check»'
}

checks() {
    printf '{"owner_id": "%s", "agent_cmd": ["/smolcord", "demo-agent"]}\n' "$OWNER_ID" >"$work/config.json"
    chmod 0644 "$work/config.json"
    "$engine" volume create "$volume" >/dev/null

    local first=smolcord-image-check-$suffix-1 second=smolcord-image-check-$suffix-2
    local t0 t1
    t0=$(now_ms)
    run_container "$first"
    if wait_for 30 logs_say_or_exited "$first" 'ready as' && logs_say "$first" 'ready as'; then
        pass READY "in $(($(now_ms) - t0)) ms from \`$engine run\`"
    else
        fail READY "no READY within 30 s"
        "$engine" logs "$first" 2>&1 | tail -20 >&2
        return
    fi

    local reply channel
    reply=$(curl -sf --max-time 5 -X POST -H 'content-type: application/json' \
        -d "{\"author_id\": \"$OWNER_ID\", \"author_name\": \"owner\", \"content\": \"hello from image-check\"}" \
        "$control/dm") || reply=
    channel=$(grep -o '"channel_id":"[0-9]*' <<<"$reply" | cut -d'"' -f4)
    t0=$(now_ms)
    if [[ -n $channel ]] && wait_for 20 answered "$channel"; then
        pass dm "answered in $(($(now_ms) - t0)) ms (the agent takes 2 s)"
    else
        fail dm "no answer within 20 s"
        "$engine" logs "$first" 2>&1 | tail -20 >&2
    fi

    local uid rss
    uid=$(container_uid "$first")
    rss=$(awk '/^VmRSS:/ { print $2 " " $3 }' "/proc/$(container_pid "$first")/status")
    if [[ $uid == 65534 ]]; then
        pass uid "65534 (RSS $rss under --memory 16m)"
    else
        fail uid "runs as uid ${uid:-?}"
    fi

    local was_healthy=0
    if wait_for 15 healthy "$first"; then
        was_healthy=1
        pass healthy "the HEALTHCHECK (\`smolcord status\`) exits 0"
    else
        fail healthy "not within 15 s: $(health_said)"
    fi

    kill -STOP "$sim_pid"
    t0=$(now_ms)
    if ((!was_healthy)); then
        fail unhealthy "not checked: never healthy"
    elif wait_for 30 unhealthy "$first"; then
        pass unhealthy "$(($(now_ms) - t0)) ms after the gateway stopped (2 intervals: $((2 * HEARTBEAT_MS)) ms)"
    else
        fail unhealthy "still healthy 30 s after the gateway stopped"
    fi
    kill -CONT "$sim_pid"
    ((!was_healthy)) || wait_for 30 healthy "$first" \
        || fail healthy "not healthy again within 30 s of the gateway's return: $(health_said)"

    t0=$(now_ms)
    "$engine" stop -t 10 "$first" >/dev/null 2>>"$work/engine.err"
    t1=$(now_ms)
    local code
    code=$("$engine" inspect --format '{{.State.ExitCode}}' "$first")
    if [[ $code == 0 ]] && ((t1 - t0 < 3000)); then
        pass stop "exit 0 in $((t1 - t0)) ms"
    else
        fail stop "exit $code in $((t1 - t0)) ms (want 0 within 3000 ms)"
    fi

    local identifies resumes
    identifies=$(total identifies)
    resumes=$(total resumes)
    t0=$(now_ms)
    run_container "$second"
    if wait_for 30 logs_say_or_exited "$second" 'session resumed' && logs_say "$second" 'session resumed' \
        && (($(total resumes) > resumes && $(total identifies) == identifies)); then
        pass resume "a new container on the volume resumed in $(($(now_ms) - t0)) ms (no identify)"
    else
        fail resume "no resume within 30 s (identifies $identifies -> $(total identifies))"
        "$engine" logs "$second" 2>&1 | tail -20 >&2
    fi
    "$engine" stop -t 10 "$second" >/dev/null 2>>"$work/engine.err" || true
}

main() {
    pick_engine
    [[ ${SKIP_INSTALL:-} == 1 ]] || install_tools
    local t_build=$SECONDS
    build_binaries
    build_image
    t_build=$((SECONDS - t_build))
    start_sim
    local t_checks=$SECONDS
    checks
    t_checks=$((SECONDS - t_checks))
    printf 'total %d s (building %d s, checks %d s), %d failed\n' \
        $((SECONDS - started)) "$t_build" "$t_checks" "$failed"
    ((failed == 0))
}

main "$@"
