#!/usr/bin/env bash
# Runs tests from fresh clones the way users run them: as root in a private
# (0700) home, and as a normal user in theirs. Needs root (it creates the
# user `smolcord-tester` if missing). Each clone builds from scratch, so this
# is a manual check, not a CI step (CI runs as root; the packaging test
# `a_binary_in_a_private_home_still_runs_as_nobody` covers the root case).
#
#   scripts/test-where-users-run.sh                  # packaging tests only
#   scripts/test-where-users-run.sh --all            # the whole `cargo test`
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
tests=(--no-fail-fast -p smolcord-app --test app packaging_)
if [[ "${1:-}" == "--all" ]]; then tests=(--no-fail-fast); fi
failed=0
user=smolcord-tester

if [[ "$(id -u)" != 0 ]]; then
    echo "run as root (it tests as root and as a normal user)" >&2
    exit 1
fi

# As root, in a 0700 directory under root's home.
private="$(mktemp -d "${HOME:-/root}/smolcord-private.XXXXXX")"
chmod 0700 "$private"
trap 'rm -rf "$private"' EXIT
git clone --quiet "$repo" "$private/smolcord"
echo "== as root in $private (mode $(stat -c %a "$private"))"
(cd "$private/smolcord" && cargo test "${tests[@]}") || failed=1
rm -rf "$private"  # its target/ is large; free the disk before the next build

# As a normal user, in their own home. rustup's toolchain lives in root's
# private home: hard-link a copy (same file system: no space, no time)
# where the user can run it, and remove it afterwards.
id "$user" >/dev/null 2>&1 || useradd --create-home --shell /bin/bash "$user"
home="$(getent passwd "$user" | cut -d: -f6)"
toolchain="$(mktemp -d /var/tmp/smolcord-toolchain.XXXXXX)"
chmod 0755 "$toolchain"
trap 'rm -rf "$private" "$toolchain"' EXIT
cp -al "$(rustc --print sysroot)/." "$toolchain/" 2>/dev/null \
    || cp -a "$(rustc --print sysroot)/." "$toolchain/"
rm -rf "$home/smolcord"
git clone --quiet "$repo" "$home/smolcord"
chown -R "$user:" "$home/smolcord"
echo "== as $user in $home (mode $(stat -c %a "$home"))"
runuser -u "$user" -- env -i HOME="$home" PATH="$toolchain/bin:/usr/bin:/bin" \
    bash -c "cd '$home/smolcord' && cargo test ${tests[*]}" || failed=1
rm -rf "$home/smolcord"
exit "$failed"
