#!/usr/bin/env bash
# Runs every scripts/compat/*/run.sh (or only those named: run-all.sh
# discordpy twilight), one after another, each printing its one-line
# verdict; exits non-zero if any failed. The Rust clients' first builds
# take minutes (nice, one job); later runs reuse target/compat-*.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if [[ $# -gt 0 ]]; then
    names=("$@")
else
    names=()
    for d in "$here"/*/; do
        [[ -x "$d/run.sh" ]] && names+=("$(basename "$d")")
    done
fi
failed=()
for name in "${names[@]}"; do
    if [[ ! -x "$here/$name/run.sh" ]]; then
        echo "compat $name: FAIL — no $here/$name/run.sh"
        failed+=("$name")
        continue
    fi
    "$here/$name/run.sh" || failed+=("$name")
done
if [[ ${#failed[@]} -gt 0 ]]; then
    echo "compat: ${#failed[@]} of ${#names[@]} failed: ${failed[*]}"
    exit 1
fi
echo "compat: all ${#names[@]} passed"
