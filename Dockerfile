# syntax=docker/dockerfile:1
# smolcord in a FROM-scratch image: one static (musl) binary, nothing else.
#
#   docker build -t smolcord .
#   podman build --format docker -t smolcord .   # podman's default OCI format drops HEALTHCHECK
#   docker run -d --name smolcord -e DISCORD_TOKEN -v smolcord-state:/state smolcord
#   docker inspect --format '{{.State.Health.Status}}' smolcord
#
# The builder is Alpine, whose Rust host target is already *-linux-musl and
# links statically, so the same file builds natively for any platform the
# rust image has (e.g. `docker buildx build --platform linux/arm64 .`).
# The image is the deployment build: the bridge with zlib-stream, without
# the simulator and the demo (cargo feature `sim`), which a bot never runs.
# Everything: --build-arg CARGO_FLAGS=; smallest: CARGO_FLAGS=--no-default-features.
# scripts/image-check.sh builds the final stage below around a host-built
# binary (same CARGO_FLAGS) and checks it in podman or Docker.

FROM rust:1.95-alpine AS build
# musl-dev: crt files and headers for linking and for ring's C code.
RUN apk add --no-cache musl-dev
WORKDIR /src
COPY . .
ARG CARGO_FLAGS="--no-default-features --features zlib"
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p smolcord-app $CARGO_FLAGS \
 && mkdir -p /out/state \
 && cp target/release/smolcord /out/smolcord
# FROM scratch has no loader and no libc: refuse a binary that needs one.
RUN ! readelf -d /out/smolcord | grep -q NEEDED

FROM scratch
# TLS roots are compiled in (webpki-roots): no /etc/ssl needed. Docker
# provides /etc/resolv.conf and /etc/hosts at run time.
COPY --from=build /out/smolcord /smolcord
# The state dir, owned by the unprivileged uid (scratch has no mkdir/chown);
# a named volume starts as a copy of it. A bind-mounted host dir must be
# writable by uid 65534 (chown 65534:65534 DIR).
COPY --from=build --chown=65534:65534 /out/state /state
USER 65534:65534
ENV SMOLCORD_STATE_DIR=/state \
    RUST_LOG=info
VOLUME /state
# `smolcord status` exits 1 unless the last heartbeat ACK is younger than two
# heartbeat intervals (~82 s); the start period covers connecting.
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["/smolcord", "status"]
# SIGTERM drains (at most 2 s) and exits 0; Docker's default 10 s stop
# timeout leaves headroom.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/smolcord"]
CMD ["run"]
